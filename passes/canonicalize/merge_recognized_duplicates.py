"""merge_recognized_duplicates: equal ops that recognition and batching made become one.

Common subexpressions are merged once more after recognition, batching and reshape collapsing: two
spellings of one activation of one value (``F.silu(x)`` and ``x * sigmoid(x)``) become two equal ops
only then, two batched groups that split one source each view it the same way, and values that
differed by a no-op reshape are equal. Left apart, they are written back as two spellings or views
that the next run merges, so a second run would change the model.

A merge can leave a reshape whose only reader is now another reshape (two equal views of one value
become one): reshapes collapse again after a merge, until a merge finds nothing.
"""

from __future__ import annotations

from graphopt.ir import Graph
from graphopt.rewrite import Pass, RewriteStats

from . import collapse_reshapes, eliminate_common_subexpressions

ROUNDS = 4


def run(graph: Graph) -> RewriteStats:
    total = RewriteStats()
    for _ in range(ROUNDS):
        merged = eliminate_common_subexpressions.run(graph)
        total.merge(merged)
        if not merged.counts:
            break
        total.merge(collapse_reshapes.PASS.run(graph))
    return total


PASS = Pass(
    "merge_recognized_duplicates",
    "Merge equal ops that recognition and batching made (two spellings of one activation of one value)."
    " Reshape chains that a merge joins collapse again.",
    run,
)
