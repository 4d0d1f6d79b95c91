"""batch_split_chains and batch_parallel_chains: N identical chains that feed one stack/concat run as one.

The seed's ``split_stack`` splits a tensor into N slices, runs the same ops on each and stacks the
results. ``batch_split_chains`` reshapes the source to [N, ...] once (a view: no data moves), runs each
op once on the whole batch (per-slice weights stacked once, here), and restores the layout the consumer
expected. Sources: one split into equal pieces, equal contiguous slices, gathers of indices 0..N-1.

``batch_parallel_chains`` takes N *independent* chains: their inputs are stacked once (the only copy
added); it applies only when the chains launch work (views alone gain nothing) and no chain's input
depends on another chain. The two differ only in where the pieces may come from.
"""

from __future__ import annotations

from graphopt.fused.registry import by_ir_op
from graphopt.ir import Op
from graphopt.rewrite import Fail, Pass, Rule, op, rewrite_pass

from .batching import find_group, rewrite_group


def pattern():
    return op.any_of(Op.STACK, Op.CONCAT)(...)


def batch_chains(name: str, description: str, *, independent: bool, from_fused: bool = False) -> Pass:
    """The pass that batches chains from one split source or, with ``independent``, unrelated ones
    (with ``from_fused``, only chains that each start at a fused op's output)."""

    def check(match):
        found = find_group(match, independent=independent)
        if from_fused and found is not None and not isinstance(found, Fail):
            pieces = [chain.piece.producer for chain in found.info["group"].chains]
            if not all(p is not None and by_ir_op(p.op) is not None for p in pieces):
                return None
        return found

    return rewrite_pass(name, description, [Rule(name, pattern, rewrite_group, check)])


SPLIT_PASS = batch_chains(
    "batch_split_chains",
    "Batch identical per-slice chains between a split and a stack/concat into one chain.",
    independent=False,
)
PARALLEL_PASS = batch_chains(
    "batch_parallel_chains",
    "Batch independent identical chains that feed one stack/concat (their inputs stacked once).",
    independent=True,
)
# The same after the fusions: per-slice chains that differed before a fusion took the ops where they
# differed (norms with different activations, each now one fused op) may end in identical ops, which
# then run as one. Before, only optimizing the optimized model again batched them.
FUSED_PARALLEL_PASS = batch_chains(
    "batch_chains_after_fusion",
    "After the fusions, batch identical chains that start at fused ops and feed one stack/concat.",
    independent=True,
    from_fused=True,
)
