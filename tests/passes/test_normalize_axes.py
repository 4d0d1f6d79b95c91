import numpy as np
import pytest
from exporting import run_onnx
from onnx import TensorProto, helper

import graphopt


def split_model(opset: int, dims: list) -> object:
    """Split(x, axis=-1) into two equal halves, without sizes: ``num_outputs`` from opset 18."""
    halves = {"num_outputs": 2} if opset >= 18 else {}
    nodes = [
        helper.make_node("Split", ["x"], ["a", "b"], axis=-1, **halves),
        helper.make_node("Sub", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dims[0], None])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def expected(x: np.ndarray) -> np.ndarray:
    a, b = np.split(x.astype(np.float64), 2, axis=-1)
    return a - b


@pytest.mark.parametrize("opset", [13, 18])
def test_split_without_sizes_on_a_symbolic_dim_is_written_as_read(opset):
    model = split_model(opset, ["N", "D"])
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    optimized, report = graphopt.optimize(model, inputs={"x": x})
    assert report.verification["ok"], report.verification["summary"]
    assert optimized.graph.node[0] == model.graph.node[0]
    assert "normalize_axes" not in report.rule_counts
    (actual,) = run_onnx(optimized, {"x": x})
    np.testing.assert_allclose(actual, expected(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 18])
def test_split_on_a_static_dim_gets_sizes_and_a_positive_axis(opset):
    optimized, report = graphopt.optimize(split_model(opset, [3, 8]))
    assert report.rule_counts.get("fold_split_sizes") == 1
    split = next(n for n in optimized.graph.node if n.op_type == "Split")
    assert helper.get_attribute_value(split.attribute[0]) == 1
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    (actual,) = run_onnx(optimized, {"x": x})
    np.testing.assert_allclose(actual, expected(x), rtol=0, atol=1e-6)
