"""batch_split_chains: split → N identical per-slice chains → stack/concat becomes one batched chain.

The seed's ``split_stack`` splits a tensor into N slices, runs the same ops on each and stacks the
results. This pass reshapes the source to [N, ...] once (a view: no data moves), runs each op once on
the whole batch (per-slice weights stacked once, here), and restores the layout the consumer expected.
Sources: one split into equal pieces, equal contiguous slices, gathers of indices 0..N-1.
"""

from __future__ import annotations

from graphopt.horizontal import find_group, rewrite_group
from graphopt.ir import Op
from graphopt.rewrite import Rule, op, rewrite_pass


def pattern():
    return op.any_of(Op.STACK, Op.CONCAT)(...)


def check(match):
    return find_group(match, independent=False)


PASS = rewrite_pass(
    "batch_split_chains",
    "Batch identical per-slice chains between a split and a stack/concat into one chain.",
    [Rule("batch_split_chains", pattern, rewrite_group, check)],
)
