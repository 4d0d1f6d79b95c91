"""Patterns that read like model code, and the matcher that finds them.

    def pattern(x):
        return op.tanh(op.layer_norm(x, ...).named("norm"))

``op.<name>`` builds a node pattern for the canonical op of that name (``op.any_of(Op.RELU, Op.TANH)``
for alternatives), the pattern function's parameters match any value, and ``...`` as the last input
accepts whatever inputs follow. A sub-pattern used twice must match the same node (decomposed norms
read ``x - mean`` twice). A number matches a one-element constant of that value that acts as a scalar
where it is read (``scalars.py``). Inputs of ``add`` and ``mul`` match in either order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

from ..ir import Node, Op, Value, constant_of
from ..ir.ops import COMMUTATIVE
from .scalars import holds_number, scalar_operand

OPS_BY_NAME = {name.lower(): value for name, value in vars(Op).items() if name.isupper()}


class Var:
    """Matches any value (``optional=True``: also an absent input) and binds it by name."""

    def __init__(self, name: str, optional: bool = False):
        self.name = name
        self.optional = optional

    def __repr__(self) -> str:
        return self.name


class NodePattern:
    def __init__(self, ops: frozenset[str], inputs: tuple, attrs: dict[str, Any]):
        self.ops = ops
        self.rest = bool(inputs) and inputs[-1] is Ellipsis
        self.inputs = inputs[:-1] if self.rest else inputs
        self.attrs = attrs
        self.name: str | None = None
        self.output_index = 0
        self._wants: tuple | None = None
        self._flat: tuple[str, ...] | bool | None = False  # False: not computed yet

    def producer_wants(self) -> tuple[tuple[int, frozenset[str], int], ...]:
        """(input index, ops, output index) of each input that must come from a node (computed
        on first use, when the pattern is complete)."""
        if self._wants is None:
            self._wants = tuple(
                (i, p.ops, p.output_index) for i, p in enumerate(self.inputs) if isinstance(p, NodePattern)
            )
        return self._wants

    def flat_names(self) -> tuple[str, ...] | None:
        """The names of the inputs, when every one is a distinct variable (a pattern of one node, such
        as the canonicalizations'): then a match is just the node's inputs bound by name."""
        if self._flat is False:
            names = [p.name for p in self.inputs if isinstance(p, Var)]
            flat = len(names) == len(self.inputs) and len(set(names)) == len(names)
            self._flat = tuple(names) if flat else None
        return self._flat

    def named(self, name: str) -> NodePattern:
        """Binds the matched node as ``match.node(name)``."""
        self.name = name
        return self

    def output(self, index: int) -> NodePattern:
        """Matches output ``index`` of the node instead of output 0."""
        self.output_index = index
        return self

    def __repr__(self) -> str:
        return (
            f"{'|'.join(sorted(self.ops))}({', '.join(map(repr, self.inputs))}{', ...' if self.rest else ''})"
        )


class _OpBuilder:
    def __getattr__(self, name: str) -> Callable[..., NodePattern]:
        if name not in OPS_BY_NAME:
            raise AttributeError(f"no canonical op named {name!r}")
        return self.any_of(OPS_BY_NAME[name])

    @staticmethod
    def any_of(*ops: str) -> Callable[..., NodePattern]:
        def build(*inputs, **attrs) -> NodePattern:
            return NodePattern(frozenset(ops), inputs, attrs)

        return build


op = _OpBuilder()


class Match:
    """What a pattern bound: values by parameter name, nodes by ``named()``, all matched nodes."""

    def __init__(
        self, root: Node, values: dict[str, Value | None], nodes: dict[str, Node], matched: list[Node]
    ):
        self.root = root
        self.values = values
        self.nodes = nodes
        self.matched = matched
        self.info: dict[str, Any] = {}  # what check() derived, for replace()

    def __getitem__(self, name: str) -> Value | None:
        return self.values[name]

    def node(self, name: str) -> Node:
        return self.nodes[name]

    def with_info(self, **info: Any) -> Match:
        self.info.update(info)
        return self


def build_pattern(function: Callable[..., NodePattern]) -> tuple[NodePattern, list[str]]:
    names = list(inspect.signature(function).parameters)
    root = function(*(Var(n) for n in names))
    if not isinstance(root, NodePattern):
        raise TypeError(f"pattern {function.__name__} must return a node pattern")
    return root, names


def match(pattern: NodePattern, node: Node) -> Match | None:
    """The first way ``pattern`` matches with ``node`` as its root, or None."""
    if pattern.output_index >= len(node.outputs) or not _may_match(pattern, node):
        return None
    flat = pattern.flat_names()
    if flat is not None and node.op in pattern.ops and None not in node._inputs:
        values = dict(zip(flat, node._inputs, strict=False))
        return Match(node, values, {pattern.name: node} if pattern.name else {}, [node])
    for binding in _match(pattern, node.outputs[pattern.output_index], {}):
        values = {k: v for k, v in binding.items() if isinstance(k, str)}
        nodes = {p.name: n for p, n in binding.items() if isinstance(p, NodePattern) and p.name}
        matched = list(dict.fromkeys(n for p, n in binding.items() if isinstance(p, NodePattern)))
        return Match(node, values, nodes, matched)
    return None


def _may_match(pattern: NodePattern, node: Node) -> bool:
    """A necessary condition, checked without the generators of ``_match``: the root's input count
    and attributes fit, and each input that the pattern wants from a node comes from a node of one
    of its ops (in either order for add and mul). Most candidates of a rule fail here, most often
    on the producers, which are therefore checked first."""
    inputs = node._inputs
    count = len(pattern.inputs)
    if len(inputs) < count or (len(inputs) > count and not pattern.rest):
        return False
    wants = pattern._wants
    if wants is None:
        wants = pattern.producer_wants()
    if (
        wants
        and not _producers_fit(wants, inputs, False)
        and not (node.op in COMMUTATIVE and count == 2 and _producers_fit(wants, inputs, True))
    ):
        return False
    if not pattern.attrs:
        return True  # (most patterns: no generator to run)
    return all(_attr_matches(node.attrs.get(key), want) for key, want in pattern.attrs.items())


def _producers_fit(wants, inputs, swapped: bool) -> bool:
    for index, ops, output_index in wants:
        value = inputs[1 - index if swapped else index]
        producer = value.producer if value is not None else None
        if producer is None or producer.op not in ops or value.index != output_index:
            return False
    return True


def _match(pattern, value: Value | None, binding: dict, reader: Node | None = None) -> Iterator[dict]:
    """The bindings under which ``pattern`` matches ``value``; ``reader``: the node reading it."""
    if isinstance(pattern, Var):
        if value is None and not pattern.optional:
            return
        if pattern.name in binding:
            if binding[pattern.name] is value:
                yield binding
            return
        yield {**binding, pattern.name: value}
        return
    if isinstance(pattern, int | float):
        scalar = scalar_operand(value, reader) if reader is not None else None
        if scalar is not None and holds_number(scalar, pattern, constant_of(value).dtype):
            yield binding
        return
    if value is None or value.producer is None:
        return
    node = value.producer
    if pattern in binding:
        if binding[pattern] is node:
            yield binding
        return
    if node.op not in pattern.ops or value.index != pattern.output_index:
        return
    if not all(_attr_matches(node.attrs.get(k), want) for k, want in pattern.attrs.items()):
        return
    inputs = node.inputs
    if len(inputs) < len(pattern.inputs) or (len(inputs) > len(pattern.inputs) and not pattern.rest):
        return
    binding = {**binding, pattern: node}
    orders = [pattern.inputs]
    if node.op in COMMUTATIVE and len(pattern.inputs) == 2:
        orders.append(pattern.inputs[::-1])
    for order in orders:
        yield from _match_inputs(order, inputs, 0, binding, node)


def _match_inputs(patterns, inputs, i: int, binding: dict, reader: Node) -> Iterator[dict]:
    if i == len(patterns):
        yield binding
        return
    for extended in _match(patterns[i], inputs[i], binding, reader):
        yield from _match_inputs(patterns, inputs, i + 1, extended, reader)


def _attr_matches(actual: Any, want: Any) -> bool:
    return want(actual) if callable(want) else actual == want
