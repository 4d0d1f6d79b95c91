"""A NaN of the original on a stress draw is the garbage of an overflow inside the original (its
inputs are finite); the candidate may give any value there, and must still match the rest."""

import numpy as np
import onnx
from onnx import TensorProto, helper

import graphopt
from graphopt.ir import DType
from graphopt.runtime.runners import run_onnx_many
from graphopt.verification.draws import random_draws
from graphopt.verification.numeric import Tolerance, compare

TOLERANCES = {DType.FLOAT32: Tolerance(1e-5, 1e-6)}


def test_on_a_stress_draw_a_nan_of_the_original_accepts_any_value():
    want = [np.array([[np.nan, 1.0], [np.nan, np.inf]], np.float32)]
    for got in ([[0.5, 1.0], [-np.inf, np.inf]], [[np.nan, 1.0], [3e38, np.inf]]):
        assert not compare(want, [np.array(got, np.float32)], ["y"], TOLERANCES)["ok"]
        verdict = compare(want, [np.array(got, np.float32)], ["y"], TOLERANCES, stress=True)
        assert verdict["ok"], verdict["summary"]


def test_on_a_stress_draw_everything_but_the_originals_nan_is_judged_as_before():
    want = [np.array([[np.nan, 1.0], [2.0, np.inf]], np.float32)]
    for got, why in (
        ([[np.nan, 1.1], [2.0, np.inf]], "max abs error"),  # a finite value off
        ([[np.nan, 1.0], [2.0, np.nan]], "NaN/inf positions"),  # an infinity become NaN
        ([[np.nan, 1.0], [2.0, -np.inf]], "NaN/inf positions"),  # an infinity of the other sign
        ([[np.nan, 1.0], [2.0, 3e38]], "NaN/inf positions"),  # an infinity become finite
        ([[np.nan, np.nan], [2.0, np.inf]], "NaN/inf positions"),  # a finite value become NaN
    ):
        verdict = compare(want, [np.array(got, np.float32)], ["y"], TOLERANCES, stress=True)
        assert not verdict["ok"] and why in verdict["summary"], (got, verdict["summary"])


def overflowing_layer_norm(width: int = 24) -> onnx.ModelProto:
    """tanh of a LayerNorm spelled out (mean, centre, square, mean, + eps, sqrt, divide) of the
    input times -1.7e38, plus that product: on rows of finite values near float32's top, the means
    sum to inf and the norm is NaN, where the fused norm (norm and tanh in one) gives the true one."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
    eps = helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
    huge = helper.make_tensor("huge", TensorProto.FLOAT, [], [-1.714704e38])
    nodes = [
        helper.make_node("Mul", ["huge", "x"], ["scaled"]),
        helper.make_node("ReduceMean", ["scaled", "axes"], ["mean"]),
        helper.make_node("Sub", ["scaled", "mean"], ["centred"]),
        helper.make_node("Mul", ["centred", "centred"], ["square"]),
        helper.make_node("ReduceMean", ["square", "axes"], ["variance"]),
        helper.make_node("Add", ["variance", "eps"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["std"]),
        helper.make_node("Div", ["centred", "std"], ["normed"]),
        helper.make_node("Tanh", ["normed"], ["activated"]),
        helper.make_node("Add", ["activated", "scaled"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "overflowing_layer_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, width])],
        [axes, eps, huge],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_a_norm_fused_where_the_spelled_out_one_overflows_passes_the_check():
    model = overflowing_layer_norm()
    constant = next(d for d in random_draws({"x": (DType.FLOAT32, (2, 4, 24))}) if d.name == "constant rows")
    _, [[y]] = run_onnx_many(model, [constant.feeds], exact=True)
    assert np.isnan(y).any()  # the original overflows on the constant rows: the case in question

    optimized, report = graphopt.optimize(model)

    assert report.verification["ok"], report.verification["summary"]
    assert [d["name"] for d in report.verification["draws"]] == ["normal", "offset", "large", "constant rows"]
    assert [n.op_type for n in optimized.graph.node] == ["Mul", "NormAct", "Add"]
    _, [[fused]] = run_onnx_many(optimized, [constant.feeds], exact=True)
    rows = ~np.isnan(y)  # where the original is finite, the fused norm agrees
    np.testing.assert_allclose(fused[rows], y[rows], rtol=1e-6)
    # and where it is NaN on finite rows, the fused norm gives the true one: a constant row
    # normalizes to 0 (rows of 2 times -1.7e38 are infinite already, and NaN in both)
    scaled = np.float32(-1.714704e38) * constant.feeds["x"]
    overflowed = ~rows & np.isfinite(scaled)
    assert overflowed.any()
    np.testing.assert_array_equal(fused[overflowed], scaled[overflowed])
