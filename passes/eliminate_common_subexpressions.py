"""eliminate_common_subexpressions: two nodes that compute the same canonical op on the same inputs
with the same attributes become one.

Python code often repeats itself (``(x - mean) ** 2`` and ``(x - mean) / std`` compute ``x - mean``
twice) and torch.export keeps every repetition; the ONNX exporters merge them. Merging here lets the
norm and activation patterns, which expect one ``x - mean`` read twice, match both.
"""

from __future__ import annotations

from graphopt.ir import Graph, is_canonical
from graphopt.ir.attrs import frozen
from graphopt.rewrite import Pass, RewriteStats


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    seen: dict[tuple, object] = {}
    for node in graph:
        if not is_canonical(node.op) or node.meta.get("side_effects") or not node.outputs:
            continue
        key = (node.op, tuple(id(v) for v in node.inputs), frozen(node.attrs))
        first = seen.setdefault(key, node)
        if first is node or any(graph.is_output(v) for v in node.outputs):
            continue
        for duplicate, original in zip(node.outputs, first.outputs, strict=True):
            graph.replace_all_uses(duplicate, original)
        graph.erase(node)
        stats.counts["merged_duplicate"] += 1
    return stats


PASS = Pass(
    "eliminate_common_subexpressions",
    "Merge nodes that compute the same canonical op on the same inputs.",
    run,
)
