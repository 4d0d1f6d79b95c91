"""What the canonicalizations that drop a node computing its own input share (remove_identity,
drop_noop_casts, drop_unit_arithmetic): its readers read that input instead, unless a name the written
model's interface shows would be lost."""

from __future__ import annotations

from graphopt.ir import Node, Value
from graphopt.rewrite import Fail


def why_not_forwarded(node: Node, x: Value) -> Fail | None:
    """Why readers of ``node``'s output cannot read ``x`` (its value) instead, or None: the output is a
    graph output, and ``x`` is a graph input or constant, or a graph output itself, so that the output's
    name cannot pass to ``x``."""
    graph = node.graph
    if graph.is_output(node.output) and (x.producer is None or graph.is_output(x)):
        return Fail(
            f"{node.output.name!r} is a graph output copied from {x.name!r}, which must keep its own name"
        )
    return None
