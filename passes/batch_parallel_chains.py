"""batch_parallel_chains: N independent identical chains that end in one stack/concat run as one.

Their inputs are stacked once (the only copy added); it applies only when the chains launch work
(views alone gain nothing) and no chain's input depends on another chain.
"""

from __future__ import annotations

from graphopt.horizontal import find_group, rewrite_group
from graphopt.ir import Op
from graphopt.rewrite import Rule, op, rewrite_pass


def pattern():
    return op.any_of(Op.STACK, Op.CONCAT)(...)


def check(match):
    return find_group(match, independent=True)


PASS = rewrite_pass(
    "batch_parallel_chains",
    "Batch independent identical chains that feed one stack/concat (their inputs stacked once).",
    [Rule("batch_parallel_chains", pattern, rewrite_group, check)],
)
