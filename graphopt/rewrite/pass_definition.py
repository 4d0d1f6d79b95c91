"""A pass: a name, a one-line description, and a function that changes a graph and says how."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import Graph
from .driver import OnRewrite, RewriteStats, apply_rules
from .rule import Rule


@dataclass(frozen=True)
class Pass:
    name: str
    description: str
    run: Callable[[Graph], RewriteStats]
    rules: tuple[Rule, ...] = ()


def rewrite_pass(
    name: str, description: str, rules: Sequence[Rule], *, on_rewrite: OnRewrite | None = None
) -> Pass:
    """A pass that applies ``rules`` to a fixed point, telling ``on_rewrite`` of each rewrite (a
    recognizer's note_origin: what it replaced is given back by ``restore_unfused`` when no fusion
    consumes it)."""
    rules = tuple(rules)
    return Pass(name, description, lambda graph: apply_rules(graph, rules, on_rewrite=on_rewrite), rules)
