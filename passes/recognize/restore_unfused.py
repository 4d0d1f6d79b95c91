"""restore_unfused: a recognized op that no fusion consumed goes back out as the model had it.

Recognizers (recognize_activations, recognize_norms, recognize_linear, recognize_stack) turn the
exporters' spellings into single ops so that fusion rules match one form. An op that no fusion took is
given back as the very nodes it replaced, so the written model is never a new decomposition that the
runtime's own optimizer no longer recognizes (see origin.py). What it gives back is merged with equal
nodes already there (``x * sigmoid(x)`` given back beside another ``sigmoid(x)``): common
subexpressions were eliminated before the recognizers ran, and the given-back nodes were not there
then (optimizing the result again would merge them).
"""

from __future__ import annotations

from graphopt.passes.canonicalize.eliminate_common_subexpressions import run as merge_equal_nodes

from graphopt.ir import Graph
from graphopt.rewrite import NearMiss, Pass, RewriteStats

from .origin import restore_unfused


def _run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    counts, kept = restore_unfused(graph)
    stats.counts.update({f"restore[{op}]": n for op, n in counts.items()})
    stats.near_misses = [
        NearMiss("restore_unfused", node, f"kept as recognized: {why}") for node, why in kept
    ]
    if counts:
        stats.counts.update(merge_equal_nodes(graph).counts)
    return stats


PASS = Pass(
    "restore_unfused",
    "Give back recognized ops (GELU, norms, linear, stack) that no fusion consumed as their original nodes.",
    _run,
)
