"""A rule is three plain functions: pattern, check, replace.

* ``pattern(x, ...)`` returns a node pattern (see pattern.py), or an ``Either`` of node patterns;
* ``check(match)`` returns the match (optionally with derived ``info``), a ``Fail`` whose reason names
  the value or node that disqualified it (reported as a near miss), or None when the rule simply does
  not apply (nothing worth reporting);
* ``replace(builder, match)`` builds the new values that take the place of the root node's outputs
  (or returns a dict {old value: new value} when it also replaces other matched values).

Rules keep no state between check and replace; the driver does all graph surgery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..ir import DType, Graph, Node, Tensor, Value, record_origins
from .pattern import Either, Match, NodePattern, build_pattern, canonical_op


@dataclass(frozen=True)
class Fail:
    reason: str


class Decline(Exception):
    """Raised by ``replace`` when it finds, while building, that the rewrite cannot be done.

    The driver removes whatever the builder created and records the reason as a near miss, so a rule
    never has to run its construction twice (once to check, once to build).
    """

    @property
    def reason(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Rule:
    # ``{tag}`` in the name stands for the alternative the match took (``norm_from_ops[{square}]``)
    name: str
    pattern: Callable[..., NodePattern | Either]
    replace: Callable[[Builder, Match], Value | Sequence[Value]]
    check: Callable[[Match], Match | Fail | None] = field(default=lambda m: m)
    # Whether the values between the root and the pattern's inputs may have readers outside the match
    # (they then stay computed, so such a rule must still pay off with them kept).
    allow_external_uses: bool = False

    @cached_property
    def root(self) -> NodePattern | Either:
        return build_pattern(self.pattern)

    def name_of(self, found: Match) -> str:
        """The name a rewrite of ``found`` is counted and recorded under."""
        return self.name.format_map(found.tags) if found.tags else self.name


class Builder:
    """Creates nodes for one rewrite; each records the rule that made it.

    ``b.node(op, *inputs, **attrs)`` adds any op and returns the Node; ``b.<canonical op>(...)``
    (``b.tanh(x)``, ``b.add(x, y)``, ``b.split(x, axis=0, sizes=...)``) returns its output value(s).
    """

    def __init__(self, graph: Graph, rule: str, anchor: Node | None = None):
        self.graph = graph
        self.rule = rule
        self.anchor = anchor
        self.created: list[Node] = []
        self.constants: list[Value] = []

    def node(
        self,
        op: str,
        *inputs: Value | None,
        outputs: Sequence[tuple[str, DType | None, Any]] | None = None,
        name: str | None = None,
        **attrs: Any,
    ) -> Node:
        """Adds a node; ``name`` defaults to one derived from the matched root's name."""
        hint = op if self.anchor is None else _below(self.anchor.name, op)
        node = self.graph.add_node(op, inputs, attrs, outputs=outputs, name=name or self._node_name(hint))
        node.meta["rule"] = self.rule
        self.created.append(node)
        return node

    def constant(
        self,
        array: np.ndarray | Tensor,
        name: str,
        dtype: DType | None = None,
        *,
        derived_from: Sequence[Value | None] | None = None,
    ) -> Value:
        """A new constant; ``derived_from``: the constants its values were computed from (else the
        driver records every constant the match read)."""
        tensor = array if isinstance(array, Tensor) else Tensor.from_array(array, dtype)
        value = self.graph.add_constant(tensor, name)
        value.meta["rule"] = self.rule
        if derived_from is not None:
            record_origins(value, derived_from)
        self.constants.append(value)
        return value

    def __getattr__(self, name: str) -> Callable[..., Value | tuple[Value, ...]]:
        op = canonical_op(name)

        def build(*inputs: Value | None, **attrs: Any) -> Value | tuple[Value, ...]:
            node = self.node(op, *inputs, **attrs)
            return node.output if len(node.outputs) == 1 else tuple(node.outputs)

        return build

    def _node_name(self, hint: str) -> str:
        return f"{hint}_{len(self.created)}" if self.created else hint


def _below(anchor: str, op: str) -> str:
    """``layer/mul`` + gelu → ``layer/mul/gelu``; a node already named for the op (written out by an
    earlier run of graphopt, and recognized again) keeps its name, so a rerun renames nothing."""
    return anchor if anchor.endswith(f"/{op}") else f"{anchor}/{op}"


@dataclass(frozen=True)
class InPlace:
    """What ``replace`` returns to change the root node itself: new attributes, and optionally fewer
    or other inputs, outputs and their readers untouched. For canonicalizations (an axis made
    non-negative, a constant shape input read into an attribute) it spares building a node."""

    attrs: dict
    inputs: tuple | None = None
