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
    """Summed by value, each once: its size times how many times non-view nodes read it, plus once
    more for its write, if a non-view node writes it and it is read at all (as a graph output too)."""
    total = 0
    for value in graph.values():
        moves = sum(1 for use in value.uses if use.node.op not in VIEWS)
        producer = value.producer
        if producer is not None and producer.op not in VIEWS and (value.uses or graph.is_output(value)):
            moves += 1
        if moves:
            total += moves * value_bytes(value)
    return total
