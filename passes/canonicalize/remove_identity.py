"""remove_identity: readers of an Identity's output read its input instead."""

from __future__ import annotations

from graphopt.rewrite import Fail, Rule, op, rewrite_pass


def pattern(x):
    return op.identity(x)


def check(match):
    node = match.root
    graph = node.graph
    x = match["x"]
    if graph.is_output(node.output) and (x.producer is None or graph.is_output(x)):
        return Fail(
            f"{node.output.name!r} is a graph output copied from {x.name!r}, which must keep its own name"
        )
    return match


def replace(b, match):
    return match["x"]


PASS = rewrite_pass(
    "remove_identity",
    "Remove Identity nodes (their readers read the input directly).",
    [Rule("remove_identity", pattern, replace, check)],
)
