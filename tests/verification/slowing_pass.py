"""A pass that computes the same outputs with much more work: a long chain of multiplications by 2
and 0.5 (exact in floating point, and not an identity ONNX Runtime removes) before each output."""

from __future__ import annotations

import numpy as np

from graphopt.ir import Graph, Op, Tensor
from graphopt.rewrite import Pass, RewriteStats

PASS_NAME = "slow_down_outputs"
CHAIN = 2000  # tens of times the optimized seed's time: slower beyond any noise of a busy machine


def _run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    outputs = []
    for value in graph.outputs:
        factors = [
            graph.add_constant(Tensor.from_array(np.array(f, dtype=value.dtype.numpy)), f"slow_{f}")
            for f in (2.0, 0.5)
        ]
        current = value
        for i in range(CHAIN):
            current = graph.add_node(Op.MUL, [current, factors[i % 2]]).output
        graph.swap_names(value, current)
        outputs.append(current)
        stats.counts["slowed_output"] += 1
    graph.set_outputs(outputs)
    return stats


SLOWING_PASS = Pass(PASS_NAME, "Recompute each output through a long chain of exact multiplications.", _run)
