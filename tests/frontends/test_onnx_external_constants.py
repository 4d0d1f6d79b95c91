import shutil

import numpy as np
import onnx
import pytest
from exporting import op_types, run_onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

import graphopt

D = 8
SCALE = np.linspace(0.5, 2.0, D, dtype=np.float32)
OFFSET = np.arange(4 * D, dtype=np.float32).reshape(4, D) / 10


def externally(array: np.ndarray, name: str, folder, location: str) -> onnx.TensorProto:
    """A tensor whose bytes lie in ``folder / location``."""
    tensor = numpy_helper.from_array(array, name)
    (folder / location).write_bytes(tensor.raw_data)
    set_external_data(tensor, location, 0, len(tensor.raw_data))
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    return tensor


def model_with_external_constants(folder, location="weights.bin"):
    """y = tanh(LayerNorm(x + offset) * scale): offset and scale are Constant nodes kept in a file."""
    offset = externally(OFFSET, "offset_value", folder, "offset.bin")
    scale = externally(SCALE, "scale_value", folder, location)
    nodes = [
        helper.make_node("Constant", [], ["offset"], value=offset),
        helper.make_node("Constant", [], ["scale"], value=scale),
        helper.make_node("Add", ["x", "offset"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "scale"], ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Tanh", ["h"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, D])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.save(model, folder / "model.onnx")
    return folder / "model.onnx"


X = np.random.default_rng(9).standard_normal((4, D)).astype(np.float32)


def float64_reference(x: np.ndarray) -> np.ndarray:
    s = x.astype(np.float64) + OFFSET
    s = s - s.mean(-1, keepdims=True)
    return np.tanh(s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-5) * SCALE)


def external_locations(model: onnx.ModelProto) -> set[str]:
    tensors = [*model.graph.initializer]
    tensors += [a.t for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    return {e.value for t in tensors for e in t.external_data if e.key == "location"}


def test_constants_in_an_external_file_are_read_and_written_beside_the_output(tmp_path):
    (tmp_path / "in").mkdir()
    path = model_with_external_constants(tmp_path / "in")
    optimized, report = graphopt.optimize(path, output=tmp_path / "out" / "model.opt.onnx")
    assert report.verification["ok"], report.verification["summary"]
    assert op_types(optimized) == ["Constant", "Constant", "NormAct"]
    shutil.rmtree(tmp_path / "in")  # (the output must not read the input's files)
    written = onnx.load(tmp_path / "out" / "model.opt.onnx", load_external_data=False)
    assert external_locations(written) <= {"model.opt.onnx.data"}
    (got,) = run_onnx(tmp_path / "out" / "model.opt.onnx", {"x": X})
    np.testing.assert_allclose(got, float64_reference(X), rtol=1e-5, atol=1e-6)


def test_a_constant_file_outside_the_model_folder_is_refused(tmp_path):
    (tmp_path / "in").mkdir()
    path = model_with_external_constants(tmp_path / "in", location="../weights.bin")
    with pytest.raises(graphopt.errors.BadInput, match=r"names external data '\.\./weights\.bin'"):
        graphopt.optimize(path)


def test_a_model_proto_with_external_constants_needs_its_path(tmp_path):
    model = onnx.load(model_with_external_constants(tmp_path), load_external_data=False)
    with pytest.raises(graphopt.errors.BadInput, match="keeps its data in an external file"):
        graphopt.optimize(model)
