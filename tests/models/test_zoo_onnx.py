import numpy as np
import onnx
import onnxruntime as ort
import pytest

from models import zoo


def _param(entry):
    # The dynamo exporter takes about a second a model; the rest of the zoo builds in milliseconds.
    marks = [pytest.mark.slow] if "dynamo" in entry.tags else []
    return pytest.param(entry, id=entry.name, marks=marks)


ENTRIES = [_param(e) for e in zoo.onnx_models()]


def _session(model_or_path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the initializer-as-input entry draws a warning by design
    source = (
        model_or_path.SerializeToString()
        if isinstance(model_or_path, onnx.ModelProto)
        else str(model_or_path)
    )
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("entry", ENTRIES)
def test_builds_checks_and_runs(entry):
    model = entry.build()
    onnx.checker.check_model(model, full_check=True)
    outputs = _session(model).run(None, entry.inputs())
    expected = entry.expected()
    if expected is not None:
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("entry", ENTRIES)
def test_save_and_reload_runs_the_same(entry, tmp_path):
    path = entry.save(tmp_path)
    reloaded = onnx.load(path)
    onnx.checker.check_model(path, full_check=True)
    assert len(reloaded.graph.node) == len(entry.build().graph.node)
    feed = entry.inputs()
    for got, want in zip(
        _session(path).run(None, feed), _session(entry.build()).run(None, feed), strict=True
    ):
        np.testing.assert_array_equal(got, want)


def test_external_data_entry_keeps_its_weight_beside_the_model(tmp_path):
    path = zoo.get("external_data.helper").save(tmp_path)
    side_file = path.with_name(path.name + ".data")
    assert side_file.stat().st_size == 64 * 64 * 4
    assert path.stat().st_size < 1024
    without_data = onnx.load(path, load_external_data=False)
    weight = next(t for t in without_data.graph.initializer if t.name == "w")
    assert weight.data_location == onnx.TensorProto.EXTERNAL


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_dynamic_batch_runs_at_other_batch_sizes(exporter):
    model = zoo.get(f"mlp_dynamic_batch.{exporter}").build()
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param
    for batch in (1, 7):
        (out,) = _session(model).run(None, {"x": np.ones((batch, 16), np.float32)})
        assert out.shape == (batch, 8)
