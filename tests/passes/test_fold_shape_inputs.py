import numpy as np
import pytest
from exporting import near_misses, op_types, run_onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt

SHAPES = {1: [6], 2: [6, 3]}
FED = np.array([2, 4], dtype=np.int64)
FED_NAME = {"input": "split", "computed": "fed", "constant": None}


def split_model(opset: int, rank: int, sizes: str) -> object:
    """Split(x, sizes) on the default axis 0; ``sizes``: "input" (fed by the caller), "computed" (from
    an input, at run time) or "constant"."""
    nodes, inits = [], []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPES[rank])]
    if sizes == "constant":
        inits.append(numpy_helper.from_array(FED, "split"))
    else:
        inputs.append(helper.make_tensor_value_info(FED_NAME[sizes], TensorProto.INT64, [2]))
        if sizes == "computed":
            nodes.append(helper.make_node("Abs", ["fed"], ["split"]))
    nodes.append(helper.make_node("Split", ["x", "split"], ["a", "b"]))
    nodes += [helper.make_node("Relu", ["a"], ["ya"]), helper.make_node("Relu", ["b"], ["yb"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None] * rank) for n in ("ya", "yb")]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def feeds(rank: int, sizes: str) -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal(SHAPES[rank]).astype(np.float32)
    return {"x": x} | ({FED_NAME[sizes]: FED} if FED_NAME[sizes] else {})


def float64_reference(x: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(part.astype(np.float64), 0.0) for part in np.split(x, [2], axis=0)]


@pytest.mark.parametrize("sizes", ["input", "computed"])
@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("opset", [13, 18])
def test_sizes_given_at_run_time_stay_with_a_near_miss(opset, rank, sizes):
    model = split_model(opset, rank, sizes)
    optimized, report = graphopt.optimize(model, inputs=feeds(rank, sizes))
    assert report.verification["ok"], report.verification["summary"]
    split = next(n for n in optimized.graph.node if n.op_type == "Split")
    assert list(split.input) == ["x", "split"]
    assert not split.attribute
    assert any("'split' are only known at run time" in r for r in near_misses(report, "fold_split_sizes"))
    actual = run_onnx(optimized, feeds(rank, sizes))
    for got, want in zip(actual, float64_reference(feeds(rank, sizes)["x"]), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [13, 18])
def test_constant_sizes_fold(opset):
    optimized, report = graphopt.optimize(split_model(opset, 2, "constant"))
    assert report.rule_counts.get("fold_split_sizes") == 1
    assert op_types(optimized) == ["Split", "Relu", "Relu"]
    actual = run_onnx(optimized, feeds(2, "constant"))
    for got, want in zip(actual, float64_reference(feeds(2, "constant")["x"]), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=0)
