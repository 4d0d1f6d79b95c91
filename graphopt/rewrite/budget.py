"""The rewrite budget: how many rewrites may still be done while bisection replays a pass."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class RewriteBudget:
    """At most ``limit`` rewrites while it is active, and which one was done last.

    Bisection replays a pass up to its n-th rewrite to find the one that changed the outputs; a pass
    that rewrites outside ``apply_rules`` takes part by asking ``may_rewrite`` and calling
    ``count_rewrite``.
    """

    limit: float
    done: int = 0
    last: tuple[str, str] | None = None  # (rule, root node) of the latest rewrite


_budget: ContextVar[RewriteBudget | None] = ContextVar("rewrite_budget", default=None)


@contextlib.contextmanager
def rewrite_budget(limit: float = float("inf")) -> Iterator[RewriteBudget]:
    """Limits (and counts) the rewrites done inside the ``with`` block."""
    budget = RewriteBudget(limit)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


def may_rewrite() -> bool:
    budget = _budget.get()
    return budget is None or budget.done < budget.limit


def count_rewrite(rule: str, node: str) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.done += 1
        budget.last = (rule, node)
