"""The pass pipeline: one explicit ordered tuple. Importing a pass module registers nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from graphopt.passes import canonicalize, fuse, horizontal, recognize

from .analysis import verify
from .errors import BadInput
from .ir import Graph
from .rewrite import NearMiss, Pass

log = logging.getLogger(__name__)

PIPELINE: tuple[Pass, ...] = (
    canonicalize.REMOVE_IDENTITY,
    # (before drop_noop_casts: a check of a conversion's input is one more reader of it)
    canonicalize.DROP_METADATA_ASSERTS,
    canonicalize.DROP_NOOP_CASTS,
    # Before constant folding, which would turn a weight's transpose into a plain constant.
    recognize.RECOGNIZE_LINEAR,
    canonicalize.FOLD_CONSTANTS,
    # (after constant folding, which may compute the one a value is divided by)
    canonicalize.DROP_UNIT_ARITHMETIC,
    # (after constant folding, which may compute a batch norm's statistics or a conv's weight)
    canonicalize.FOLD_BATCH_NORM,
    canonicalize.FOLD_ONNX_BATCH_NORM,
    canonicalize.FOLD_SHAPE_INPUTS,
    canonicalize.NORMALIZE_AXES,
    canonicalize.ELIMINATE_COMMON_SUBEXPRESSIONS,
    recognize.RECOGNIZE_STACK,
    recognize.RECOGNIZE_ACTIVATIONS,
    recognize.RECOGNIZE_NORMS,
    recognize.RECOGNIZE_GROUP_NORMS,
    # Before the batching: its one lookup is the split source that batch_split_chains batches from.
    horizontal.BATCH_EMBEDDING_LOOKUPS,
    horizontal.BATCH_EMBEDDING_BAGS,
    horizontal.BATCH_SPLIT_CHAINS,
    horizontal.BATCH_PARALLEL_CHAINS,
    canonicalize.COLLAPSE_RESHAPES,
    # (after batching and reshape collapsing too: two batched rewrites of one source each view it the
    # same way, and values that differed by a no-op reshape are equal now)
    canonicalize.MERGE_RECOGNIZED_DUPLICATES,
    fuse.FUSE_NORM_ACT,
    fuse.FUSE_NORM_ACT_PER_SLICE,
    fuse.FUSE_NORM_ACT_LINEAR,
    fuse.FUSE_GROUP_NORM_ACT,
    # (after the norm fusions, which take an activation after a norm first; a batch norm's activation
    # before fuse_bias_act would take it alone)
    fuse.FUSE_BATCH_NORM_ACT,
    fuse.FUSE_BIAS_ACT,
    horizontal.BATCH_CHAINS_AFTER_FUSION,
    # (after the fusions: a fused norm's second output is what keeps ONNX Runtime from joining them)
    canonicalize.JOIN_SLICES_INTO_SPLIT,
    # (last but dead-node removal: a recognizer is a means, not a result)
    recognize.RESTORE_UNFUSED,
    canonicalize.REMOVE_DEAD_NODES,
)


@dataclass
class PassReport:
    name: str
    counts: dict[str, int]
    near_misses: list[NearMiss]
    seconds: float
    nodes_before: int
    nodes_after: int
    skipped: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(self.counts.values())


def pass_names() -> list[str]:
    return [p.name for p in PIPELINE]


def select_passes(only: Sequence[str] = (), skip: Sequence[str] = ()) -> tuple[Pass, ...]:
    """The pipeline restricted by pass names; an unknown name is an error that lists the valid ones."""
    valid = pass_names()
    for name in (*only, *skip):
        if name not in valid:
            raise BadInput(f"unknown pass {name!r}; valid passes: {', '.join(valid)}")
    return tuple(p for p in PIPELINE if (not only or p.name in only) and p.name not in skip)


def _log_pass(step: PassReport) -> None:
    """What the pass did, for ``graphopt -v`` (and its near misses for ``-vv``)."""
    done = ", ".join(f"{rule} × {count}" for rule, count in sorted(step.counts.items()) if count)
    log.info(
        "%s: %s; %d → %d nodes, %.1f ms",
        step.name, done or "no change", step.nodes_before, step.nodes_after, step.seconds * 1e3,
    )  # fmt: skip
    for miss in step.near_misses:
        log.debug("%s: near miss of %s at %r: %s", step.name, miss.rule, miss.node, miss.reason)


def run_passes(
    graph: Graph,
    passes: Sequence[Pass],
    *,
    check_each: bool = False,
    on_pass: Callable[[int, int, str], None] | None = None,
) -> list[PassReport]:
    """Runs the passes in order; with ``check_each``, verify(graph) after every pass. A graph that its
    frontend carries through untouched (an ONNX model too old to upgrade) skips every pass."""
    carried = graph.meta.get("carry_through")
    if carried:
        count = len(graph)
        return [PassReport(p.name, {}, [], 0.0, count, count, skipped=True, notes=[carried]) for p in passes]
    reports = []
    for index, step in enumerate(passes):
        if on_pass is not None:
            on_pass(index, len(passes), step.name)
        before = len(graph)
        start = time.perf_counter()
        stats = step.run(graph)
        graph.sort()
        seconds = time.perf_counter() - start
        if check_each:
            verify(graph)
        reports.append(
            PassReport(step.name, dict(stats.counts), stats.near_misses, seconds, before, len(graph))
        )
        _log_pass(reports[-1])
    if on_pass is not None:
        on_pass(len(passes), len(passes), "")
    return reports
