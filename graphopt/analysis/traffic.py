"""Estimated memory traffic of a graph: every node reads its inputs and writes its outputs once.

Views (reshape, squeeze, unsqueeze, identity) move nothing. Symbolic dims count as 1, so figures for
graphs with a dynamic batch are per unit of batch. It is an estimate for the report, not a measurement.
"""

from __future__ import annotations

from ..ir import Graph, Value
from ..ir.ops import VIEWS


def value_bytes(value: Value) -> int:
    if value.dtype is None or value.shape is None:
        return 0
    count = 1
    for dim in value.shape:
        count *= dim if isinstance(dim, int) else 1
    return count * value.dtype.itemsize


def estimate_traffic(graph: Graph) -> int:
    total = 0  # (plain loops, not sums of generators: this walks the whole graph twice per optimize)
    for node in graph:
        if node.op in VIEWS:
            continue
        for value in node.inputs:
            if value is not None:
                total += value_bytes(value)
        for value in node.outputs:
            if value.uses or graph.is_output(value):
                total += value_bytes(value)
    return total
