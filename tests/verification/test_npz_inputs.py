import numpy as np
import pytest
from broken_pass import tanh_chain

from graphopt.errors import BadInput
from graphopt.frontends.onnx import from_onnx
from graphopt.verification.npz_inputs import feeds_from_arrays, load_npz


def _two_input_graph():
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return from_onnx(model)


def test_arrays_that_fit_become_feeds():
    graph = _two_input_graph()
    a, b = np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32)
    feeds = feeds_from_arrays(graph, {"a": a, "b": b})
    assert feeds["a"] is a and feeds["b"] is b


def test_one_size_per_symbolic_dim():
    graph = _two_input_graph()
    with pytest.raises(BadInput, match=r"dim 'batch' is 5 in 'b' axis 0 but 3 in 'a' axis 0"):
        feeds_from_arrays(graph, {"a": np.zeros((3, 4), np.float32), "b": np.zeros((5, 4), np.float32)})


def test_load_npz_round_trip_and_refusals(tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, x=np.arange(4, dtype=np.float32))
    assert load_npz(path)["x"].tolist() == [0, 1, 2, 3]
    single = tmp_path / "single.npy"
    np.save(single, np.arange(3))
    with pytest.raises(BadInput, match="single array"):
        load_npz(single)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(BadInput, match="cannot be read"):
        load_npz(pickled)


def test_an_input_with_a_default_may_be_left_out():
    model = tanh_chain()
    from onnx import helper, numpy_helper

    model.graph.input.append(helper.make_tensor_value_info("scale", 1, [8]))
    graph = from_onnx(model)
    feeds = feeds_from_arrays(graph, {"x": np.zeros((2, 8), np.float32)})
    assert set(feeds) == {"x"}
    assert numpy_helper.to_array(model.graph.initializer[0]).shape == (8,)
