"""Finding the rewrite that changed a model's outputs.

When the optimized model computes something else, the pipeline is replayed on fresh loads of the
original: first a growing prefix of the passes, bisected to the first pass after which the outputs
differ, then that pass limited to its first n rewrites (``rewrite_budget``), bisected to the first
rewrite after which they differ. That rewrite's rule and root node are the culprit.

Each replay compares against the same reference outputs, so every step costs one load, the passes
and one run of the candidate: about log2(passes) + log2(rewrites) + 3 of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..files import model_files
from ..pipeline import run_passes
from ..rewrite import Pass, rewrite_budget
from .checking import Reference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Culprit:
    """Where the outputs first changed. ``rule``/``node`` are None when the pass that changed them
    does not count its rewrites, and ``pass_name`` is None when the round trip alone changes them."""

    pass_name: str | None
    rule: str | None = None
    node: str | None = None
    rewrite: int | None = None  # 1-based, within the pass
    rewrites: int | None = None  # how many the pass does in all

    def describe(self) -> str:
        if self.pass_name is None:
            return "the round trip with no pass already changes the outputs (a frontend/backend bug)"
        if self.rule is None:
            return f"pass {self.pass_name}"
        return (
            f"rule {self.rule} at node {self.node!r} "
            f"(pass {self.pass_name}, rewrite {self.rewrite} of {self.rewrites})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pass": self.pass_name,
            "rule": self.rule,
            "node": self.node,
            "rewrite": self.rewrite,
            "rewrites": self.rewrites,
            "description": self.describe(),
        }


def bisect(model: Any, passes: Sequence[Pass], reference: Reference) -> Culprit | None:
    """The first pass, and the first rewrite in it, after which ``model`` (a path, ModelProto or
    ExportedProgram: the original, reloaded for each replay) no longer matches ``reference``.
    None if the full pipeline matches (a mismatch that does not reproduce)."""

    def differs(count: int, limit: float = float("inf")) -> bool:
        source, _ = _replay(model, passes[:count], limit)
        verdict = reference.check(model_files.to_model(source))
        log.info("bisect: %d pass(es), rewrite limit %s: %s", count, limit, verdict["summary"])
        return not verdict["ok"]

    if differs(0):
        return Culprit(None)
    if not differs(len(passes)):
        return None
    # differs(0) is False and differs(len) is True: some prefix length k has k-1 good and k bad.
    count = _first_true(1, len(passes), differs)
    step = passes[count - 1]
    _, budget = _replay(model, passes[:count], float("inf"))
    total = budget.done
    if total == 0:
        return Culprit(step.name)
    # With the full pass the outputs differ; with none of its rewrites they match (prefix count - 1).
    limit = _first_true(1, total, lambda n: differs(count, n))
    _, budget = _replay(model, passes[:count], limit)
    rule, node = budget.last
    return Culprit(step.name, rule, node, limit, total)


def _replay(model: Any, passes: Sequence[Pass], limit: float):
    """A fresh load with ``passes`` run, the last of them stopped after ``limit`` rewrites."""
    source = model_files.load(model)
    run_passes(source.graph, passes[:-1])
    with rewrite_budget(limit) as budget:
        run_passes(source.graph, passes[-1:])
    return source, budget


def _first_true(low: int, high: int, predicate: Callable[[int], bool]) -> int:
    """The smallest n in [low, high] with predicate(n), given predicate(low - 1) is False and
    predicate(high) is True (so some adjacent pair changes from False to True)."""
    while low < high:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle + 1
    return low
