import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from exporting import op_types, run_onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt

SUITES = Path(onnx.__file__).parent / "backend" / "test" / "data"


def opset6_model(nodes, inits=(), x_shape=(4, 8), y_shape=(4, 8)):
    """A model as exporters wrote them for opset 6: IR version 3, its weights listed as inputs too."""
    weights = [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in inits]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    inputs += [helper.make_tensor_value_info(w.name, TensorProto.FLOAT, list(w.dims)) for w in weights]
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], weights
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)


X = np.random.default_rng(7).standard_normal((4, 8)).astype(np.float32) * 3 + 1


def test_an_opset_6_model_is_upgraded_and_says_so():
    bias = np.linspace(-1, 1, 8)
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["s"], broadcast=1),  # (opset 6: broadcasting is asked for)
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = opset6_model(nodes, [("bias", bias)])
    # (ONNX Runtime has no Add before opset 7; the bias add and ReLU would fuse: this looks at the upgrade)
    optimized, report = graphopt.optimize(model, verify=False, skip=["fuse_bias_act"])
    assert (
        "imports default-domain opset 6: upgraded to opset 13 with onnx.version_converter" in report.notes[0]
    )
    assert [(o.domain, o.version) for o in optimized.opset_import] == [("", 13)]
    assert op_types(optimized) == ["Add", "Relu"]
    (got,) = run_onnx(optimized, {"x": X})
    np.testing.assert_allclose(got, np.maximum(X.astype(np.float64) + bias.astype(np.float32), 0), rtol=1e-6)


def test_an_opset_6_norm_and_activation_fuse_after_the_upgrade():
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["square"]),
        helper.make_node("ReduceMean", ["square"], ["var"], axes=[-1]),
        helper.make_node(
            "Constant", [], ["eps"], value=helper.make_tensor("e", TensorProto.FLOAT, [], [1e-5])
        ),
        helper.make_node("Add", ["var", "eps"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["h"]),
        helper.make_node("Tanh", ["h"], ["y"]),
    ]
    optimized, _ = graphopt.optimize(opset6_model(nodes), verify=False)
    assert op_types(optimized) == ["NormAct"]
    (got,) = run_onnx(optimized, {"x": X})
    d = X.astype(np.float64) - X.mean(-1, keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(got, np.tanh(d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)), atol=1e-6)


def test_an_opset_6_model_the_converter_cannot_upgrade_is_carried_through_untouched(tmp_path):
    # ImageScaler (an experimental op of opset 1) has no schema the converter knows; ONNX Runtime runs it.
    nodes = [
        helper.make_node("ImageScaler", ["x"], ["s"], scale=2.0, bias=[1.0, -2.0, 3.0]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = opset6_model(nodes, x_shape=(1, 3, 2, 2), y_shape=(1, 3, 2, 2))
    onnx.save(model, tmp_path / "old.onnx")
    optimized, report = graphopt.optimize(tmp_path / "old.onnx", output=tmp_path / "old.opt.onnx")
    assert report.verification["ok"], report.verification["summary"]
    assert "carried through untouched" in report.notes[0]
    assert all(p.skipped for p in report.passes)
    assert optimized.SerializeToString() == model.SerializeToString()
    x = np.random.default_rng(8).standard_normal((1, 3, 2, 2)).astype(np.float32)
    (got,) = run_onnx(tmp_path / "old.opt.onnx", {"x": x})
    want = np.maximum(2.0 * x.astype(np.float64) + np.array([1.0, -2.0, 3.0]).reshape(1, 3, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_opset_0_is_refused():
    model = opset6_model([helper.make_node("Relu", ["x"], ["y"])])
    model.opset_import[0].version = 0
    with pytest.raises(graphopt.errors.BadInput, match="opset 0; expected an opset from 1 to"):
        graphopt.optimize(model)


# Models of the onnx package's own suites (exported by PyTorch at opset 6), with their expected outputs.
SUITE_MODELS = [
    "pytorch-operator/test_operator_chunk",
    "pytorch-operator/test_operator_view",
    "pytorch-operator/test_operator_flatten",
    "pytorch-operator/test_operator_index",
    "pytorch-operator/test_operator_permute2",
    "pytorch-operator/test_operator_reduced_mean_keepdim",
    "pytorch-converted/test_Linear_no_bias",
    "pytorch-converted/test_Embedding",
]


def read_tensor(path: Path) -> np.ndarray:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


@pytest.mark.parametrize("name", SUITE_MODELS)
def test_opset_6_models_of_the_onnx_suites_compute_their_expected_outputs(name):
    folder = SUITES / name
    model = onnx.load(folder / "model.onnx")
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) <= 6
    data = folder / "test_data_set_0"
    arrays = [read_tensor(p) for p in sorted(data.glob("input_*.pb"))]
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    feeds = dict(zip(names, arrays, strict=True))
    optimized, report = graphopt.optimize(model, inputs=feeds)
    assert report.verification["ok"], report.verification["summary"]
    assert "upgraded to opset" in report.notes[0]
    got = run_onnx(optimized, feeds)
    for actual, path in zip(got, sorted(data.glob("output_*.pb")), strict=True):
        expected = read_tensor(path)
        tolerance = 1e-5 * max(1.0, math.sqrt(expected.size))
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=tolerance)
