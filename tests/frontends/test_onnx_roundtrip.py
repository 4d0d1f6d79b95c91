import numpy as np
import onnx
import pytest

from graphopt.analysis import verify
from graphopt.files import model_files as model_io
from graphopt.runtime.runners import run_onnx
from models import zoo

ENTRIES = [entry.name for entry in zoo.onnx_models()]


def round_trip(path):
    source = model_io.load(path)
    verify(source.graph)
    return source, model_io.to_model(source)


@pytest.mark.parametrize("name", ENTRIES)
def test_no_pass_round_trip_is_lossless(name, tmp_path):
    entry = zoo.get(name)
    path = entry.save(tmp_path)
    original = onnx.load(str(path), load_external_data=False)
    source, written = round_trip(path)
    assert written.SerializeToString() == original.SerializeToString()
    out = model_io.write(written, tmp_path / "out" / "model.onnx", source)
    onnx.checker.check_model(str(out), full_check=True)
    feeds = entry.inputs()
    _, expected = run_onnx(path, feeds)
    _, actual = run_onnx(out, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)


def test_external_weights_stay_external_and_are_not_loaded(tmp_path):
    entry = next(e for e in zoo.onnx_models() if "external_data" in e.tags)
    path = entry.save(tmp_path)
    source = model_io.load(path)
    assert not any(v.const.loaded for v in source.graph.constants.values() if v.const.nbytes > 4096)
    out = model_io.write(model_io.to_model(source), tmp_path / "opt" / "model.opt.onnx", source)
    data = out.with_name("model.opt.onnx.data")
    assert data.is_file() and data.stat().st_size > 0
    model = onnx.load(str(out), load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external and all(
        {e.key: e.value for e in t.external_data}["location"] == "model.opt.onnx.data" for t in external
    )
    feeds = entry.inputs()
    np.testing.assert_array_equal(run_onnx(out, feeds)[1][0], run_onnx(path, feeds)[1][0])
