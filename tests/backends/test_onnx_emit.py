import numpy as np
import pytest
from exporting import run_onnx

from graphopt.backends.onnx import to_onnx
from graphopt.ir import DType, Graph, Op


def split_without_sizes(opset: int, *, fed: bool) -> Graph:
    """A split whose sizes are not known statically: fed at run time, or the equal split."""
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, ("N", "D"))
    inputs = [x]
    if fed:
        inputs.append(graph.add_input("sizes", DType.INT64, (2,)))
    outputs = [(name, DType.FLOAT32, ("N", None)) for name in ("a", "b")]
    split = graph.add_node(Op.SPLIT, inputs, {"axis": 1}, outputs=outputs, name="split")
    graph.set_outputs(list(split.outputs))
    graph.meta["opset"] = {"": opset}
    return graph


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_a_split_without_static_sizes_is_written_as_the_equal_split(opset):
    model = to_onnx(split_without_sizes(opset, fed=False))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    a, b = run_onnx(model, {"x": x})
    np.testing.assert_array_equal(a, x[:, :3])
    np.testing.assert_array_equal(b, x[:, 3:])


@pytest.mark.parametrize("opset", [13, 18])
def test_a_split_with_sizes_fed_at_run_time_keeps_reading_them(opset):
    model = to_onnx(split_without_sizes(opset, fed=True))
    assert list(model.graph.node[0].input) == ["x", "sizes"]
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    a, b = run_onnx(model, {"x": x, "sizes": np.array([1, 5], dtype=np.int64)})
    np.testing.assert_array_equal(a, x[:, :1])
    np.testing.assert_array_equal(b, x[:, 1:])
