"""Estimated memory traffic of a graph: every node reads its inputs and writes its outputs once.

Views (reshape, squeeze, unsqueeze, identity) move nothing. Symbolic dims count as 1, so figures for
graphs with a dynamic batch are per unit of batch. It is an estimate for the report, not a measurement.
"""

from __future__ import annotations

from .ir import Graph, Value
from .ir.ops import VIEWS


def value_bytes(value: Value) -> int:
    if value.dtype is None or value.shape is None:
        return 0
    count = 1
    for dim in value.shape:
        count *= dim if isinstance(dim, int) else 1
    return count * value.dtype.itemsize


def estimate_traffic(graph: Graph) -> int:
    total = 0
    for node in graph:
        if node.op in VIEWS:
            continue
        total += sum(value_bytes(v) for v in node.inputs if v is not None)
        total += sum(value_bytes(v) for v in node.outputs if v.uses or graph.is_output(v))
    return total
