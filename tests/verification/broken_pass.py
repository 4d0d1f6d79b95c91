"""A model with a chain of Tanh nodes and a pass whose rule is wrong at exactly one of them, so the
numeric check fails and bisection has one right answer."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from graphopt.ir import Op
from graphopt.rewrite import Rule, op, rewrite_pass

RULE = "retanh"
PASS_NAME = "rewrite_tanh"
# The node the rule gets wrong: its name in tanh_chain and in the torch.export of TanhChain.
BAD_NODES = {"onnx": "t3", "torch": "tanh_2"}


def tanh_chain(length: int = 5, batch: int | str = 2, width: int = 8) -> onnx.ModelProto:
    """x[batch, width] → (Tanh t1 … tN) → Mul by a constant → y."""
    nodes, previous = [], "x"
    for i in range(1, length + 1):
        nodes.append(helper.make_node("Tanh", [previous], [f"h{i}"], name=f"t{i}"))
        previous = f"h{i}"
    nodes.append(helper.make_node("Mul", [previous, "scale"], ["y"], name="scale_out"))
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, width, dtype=np.float32), "scale")
    graph = helper.make_graph(
        nodes,
        "tanh_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])],
        [scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    return model


class TanhChain(torch.nn.Module):
    """The torch twin of tanh_chain: tanh, tanh_1, … tanh_{length-1}, then a scale."""

    def __init__(self, length: int = 5, width: int = 8):
        super().__init__()
        self.length = length
        self.register_buffer("scale", torch.linspace(0.5, 1.5, width))

    def forward(self, x):
        for _ in range(self.length):
            x = torch.tanh(x)
        return x * self.scale


def _pattern(x):
    return op.tanh(x)


def _check(match):
    return None if match.root.meta.get("rule") == RULE else match  # (its own output: a fixed point)


def _replace(b, match):
    """Rebuilds each Tanh, but writes the one named in BAD_NODES as a Sigmoid: a wrong rewrite."""
    x = match["x"]
    if match.root.name in BAD_NODES.values():
        return b.node(Op.SIGMOID, x).output
    return b.tanh(x)


BROKEN_PASS = rewrite_pass(
    PASS_NAME, "Rebuild Tanh nodes (wrong at one of them).", [Rule(RULE, _pattern, _replace, _check)]
)
