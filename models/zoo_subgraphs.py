"""Hand-built models with subgraphs (If, Loop, Scan); every body reads at least one outer-scope value."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from models.onnx_build import BOOL, FLOAT, INT64, floats, init, model, tensor


def if_outer_scope() -> onnx.ModelProto:
    """`y = Relu(If(flag, doubled + bias, doubled - x))`: both branches read `doubled` (and `bias`, `x`)."""
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["doubled", "bias"], ["then_out"])],
        "then_branch",
        [],
        [tensor("then_out", FLOAT, [2, 3])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["doubled", "x"], ["else_out"])],
        "else_branch",
        [],
        [tensor("else_out", FLOAT, [2, 3])],
    )
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["doubled"]),
        helper.make_node("If", ["flag"], ["chosen"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Relu", ["chosen"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "if_outer_scope",
        [tensor("x", FLOAT, [2, 3]), tensor("flag", BOOL, [])],
        [tensor("y", FLOAT, [2, 3])],
        [init("two", np.float32(2.0)), init("bias", floats(3, seed=3))],
    )
    return model(graph)


def if_outer_scope_inputs() -> dict[str, np.ndarray]:
    return {"x": floats(2, 3, seed=1), "flag": np.array(True)}


def if_outer_scope_expected() -> list[np.ndarray]:
    feed = if_outer_scope_inputs()
    doubled = feed["x"] * 2
    chosen = doubled + floats(3, seed=3) if feed["flag"] else doubled - feed["x"]
    return [np.maximum(chosen, 0)]


def _loop_body(step_value: str) -> onnx.GraphProto:
    return helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", step_value], ["acc_out"]),
            helper.make_node("Identity", ["acc_out"], ["acc_scan"]),
        ],
        "loop_body",
        [tensor("iteration", INT64, []), tensor("cond_in", BOOL, []), tensor("acc_in", FLOAT, [2, 3])],
        [tensor("cond_out", BOOL, []), tensor("acc_out", FLOAT, [2, 3]), tensor("acc_scan", FLOAT, [2, 3])],
    )


def loop_outer_scope() -> onnx.ModelProto:
    """`trips` iterations of `acc += tanh(x)`, where `tanh(x)` is computed outside the body."""
    nodes = [
        helper.make_node("Tanh", ["x"], ["step"]),
        helper.make_node("Loop", ["trips", "", "zeros"], ["total", "history"], body=_loop_body("step")),
    ]
    graph = helper.make_graph(
        nodes,
        "loop_outer_scope",
        [tensor("x", FLOAT, [2, 3]), tensor("trips", INT64, [])],
        [tensor("total", FLOAT, [2, 3]), tensor("history", FLOAT, [None, 2, 3])],
        [init("zeros", np.zeros((2, 3), np.float32))],
    )
    return model(graph)


def loop_outer_scope_inputs() -> dict[str, np.ndarray]:
    return {"x": floats(2, 3, seed=1), "trips": np.array(3, np.int64)}


def loop_outer_scope_expected() -> list[np.ndarray]:
    feed = loop_outer_scope_inputs()
    step = np.tanh(feed["x"])
    history = np.stack([step * (i + 1) for i in range(int(feed["trips"]))])
    return [history[-1], history]


def nested_if_in_loop() -> onnx.ModelProto:
    """A Loop whose body holds an If; the If's branches read `step`, defined two scopes up."""
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["then_out"])],
        "add_step",
        [],
        [tensor("then_out", FLOAT, [2, 3])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["acc_in", "step"], ["else_out"])],
        "sub_step",
        [],
        [tensor("else_out", FLOAT, [2, 3])],
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Mod", ["iteration", "two"], ["parity"]),
            helper.make_node("Equal", ["parity", "zero"], ["is_even"]),
            helper.make_node(
                "If", ["is_even"], ["acc_out"], then_branch=then_branch, else_branch=else_branch
            ),
        ],
        "alternating_body",
        [tensor("iteration", INT64, []), tensor("cond_in", BOOL, []), tensor("acc_in", FLOAT, [2, 3])],
        [tensor("cond_out", BOOL, []), tensor("acc_out", FLOAT, [2, 3])],
    )
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["step"]),
        helper.make_node("Loop", ["trips", "", "x"], ["total"], body=body),
    ]
    graph = helper.make_graph(
        nodes,
        "nested_if_in_loop",
        [tensor("x", FLOAT, [2, 3]), tensor("trips", INT64, [])],
        [tensor("total", FLOAT, [2, 3])],
        [init("two", np.int64(2)), init("zero", np.int64(0))],
    )
    return model(graph)


def nested_if_in_loop_inputs() -> dict[str, np.ndarray]:
    return {"x": floats(2, 3, seed=1), "trips": np.array(5, np.int64)}


def nested_if_in_loop_expected() -> list[np.ndarray]:
    feed = nested_if_in_loop_inputs()
    step, acc = 1 / (1 + np.exp(-feed["x"])), feed["x"].copy()
    for i in range(int(feed["trips"])):
        acc = acc + step if i % 2 == 0 else acc - step
    return [acc]


def scan_outer_scope() -> onnx.ModelProto:
    """A running sum over the rows of `rows`; each emitted row is scaled by `scale` from the outer graph."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["state_in", "row"], ["state_out"]),
            helper.make_node("Mul", ["state_out", "scale"], ["scaled"]),
        ],
        "running_sum",
        [tensor("state_in", FLOAT, [3]), tensor("row", FLOAT, [3])],
        [tensor("state_out", FLOAT, [3]), tensor("scaled", FLOAT, [3])],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["start", "rows"], ["final", "sums"], body=body, num_scan_inputs=1)],
        "scan_outer_scope",
        [tensor("start", FLOAT, [3]), tensor("rows", FLOAT, [5, 3])],
        [tensor("final", FLOAT, [3]), tensor("sums", FLOAT, [5, 3])],
        [init("scale", np.full(3, 0.5, np.float32))],
    )
    return model(graph)


def scan_outer_scope_inputs() -> dict[str, np.ndarray]:
    return {"start": floats(3, seed=1), "rows": floats(5, 3, seed=2)}


def scan_outer_scope_expected() -> list[np.ndarray]:
    feed = scan_outer_scope_inputs()
    sums = feed["start"] + np.cumsum(feed["rows"], axis=0)
    return [sums[-1], sums * 0.5]
