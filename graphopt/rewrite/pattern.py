"""Patterns that read like model code, and the matcher that finds them.

    def pattern(x, scale=None):
        return op.tanh(op.layer_norm(x, scale).named("norm"))

``op.<name>`` builds a node pattern for the canonical op of that name (``op.any_of(Op.RELU, Op.TANH)``
for alternative ops), the pattern function's parameters match any value, one with a default of None
also an absent input, and ``...`` as the last input accepts whatever inputs follow. ``Either(tag,
a=..., b=...)`` matches the first alternative that matches, and ``match.tags[tag]`` names it. A
sub-pattern used twice must match the same node (decomposed norms read ``x - mean`` twice). A number
matches a one-element constant of that value that acts as a scalar where it is read (``scalars.py``).
Inputs of ``add`` and ``mul`` match in either order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..ir import Node, Op, Value, constant_of
from ..ir.ops import COMMUTATIVE
from .scalars import holds_number, scalar_operand

OPS_BY_NAME = {name.lower(): value for name, value in vars(Op).items() if name.isupper()}


def canonical_op(name: str) -> str:
    """The canonical op called ``name`` (``tanh`` is ``Op.TANH``): ``op.tanh``, ``builder.tanh``."""
    if name not in OPS_BY_NAME:
        raise AttributeError(f"no canonical op named {name!r}")
    return OPS_BY_NAME[name]


@dataclass(frozen=True)
class Var:
    """Matches any value (``optional=True``: also an absent input) and binds it by name."""

    name: str
    optional: bool = False

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
        required = len(self.inputs)  # (a node may leave out the optional inputs at the end)
        while required and getattr(self.inputs[required - 1], "optional", False):
            required -= 1
        self.counts = range(required, 1 << 31 if self.rest else len(self.inputs) + 1)  # input counts that fit
        # (input index, ops, output index) of each input that must come from a node (a sub-pattern is
        # complete when it is passed in: Python builds the arguments first)
        self.producer_wants = tuple(
            (i, p.ops, p.output_index)
            for i, p in enumerate(self.inputs)
            if isinstance(p, NodePattern | Either) and p.ops
        )
        # The names of the inputs, when every one is a distinct required variable (a pattern of one
        # node, such as the canonicalizations'): then a match is just the node's inputs bound by name.
        names = [p.name for p in self.inputs if isinstance(p, Var) and not p.optional]
        self.flat_names = tuple(names) if len(names) == len(self.inputs) == len(set(names)) else None

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


class Either:
    """Matches the first of ``alternatives`` that matches, and binds its label as ``match.tags[tag]``.

    ``ops`` is the union of the alternatives' ops when each is a node pattern (of one output index),
    else empty: what the driver knows of the node that alternative node patterns match."""

    def __init__(self, tag: str, /, **alternatives: Any):
        self.tag = tag
        self.alternatives = alternatives
        nodes = [p for p in alternatives.values() if isinstance(p, NodePattern)]
        self.output_index = nodes[0].output_index if nodes else 0
        uniform = len(nodes) == len(alternatives) and all(p.output_index == self.output_index for p in nodes)
        self.ops = frozenset().union(*(p.ops for p in nodes)) if uniform else frozenset()

    def __repr__(self) -> str:
        return f"Either({self.tag}: {' | '.join(f'{k}={v!r}' for k, v in self.alternatives.items())})"


class _OpBuilder:
    def __getattr__(self, name: str) -> Callable[..., NodePattern]:
        return self.any_of(canonical_op(name))

    @staticmethod
    def any_of(*ops: str) -> Callable[..., NodePattern]:
        def build(*inputs, **attrs) -> NodePattern:
            return NodePattern(frozenset(ops), inputs, attrs)

        return build


op = _OpBuilder()


@dataclass(eq=False)
class Match:
    """What a pattern bound: values by parameter name, nodes by ``named()``, the label of each
    ``Either`` by its tag, and all matched nodes."""

    root: Node
    values: dict[str, Value | None]
    nodes: dict[str, Node]
    matched: list[Node]
    tags: dict[str, str]
    info: dict[str, Any] = field(default_factory=dict)  # what check() derived, for replace()

    def __getitem__(self, name: str) -> Value | None:
        return self.values[name]

    def node(self, name: str) -> Node:
        return self.nodes[name]

    def with_info(self, **info: Any) -> Match:
        self.info.update(info)
        return self

    def inner_values(self, *besides: Node | None) -> list[Value]:
        """The outputs of the matched nodes but the root's (and ``besides``'): what a rewrite removes."""
        return [v for n in self.matched if n is not self.root and n not in besides for v in n.outputs]


def build_pattern(function: Callable[..., NodePattern | Either]) -> NodePattern | Either:
    """The pattern ``function`` returns for a variable per parameter (optional where it defaults to None)."""
    parameters = inspect.signature(function).parameters.values()
    root = function(*(Var(p.name, optional=p.default is None) for p in parameters))
    if not isinstance(root, NodePattern | Either) or not root.ops:
        raise TypeError(f"pattern {function.__name__} must return a node pattern")
    return root


def match(pattern: NodePattern | Either, node: Node) -> Match | None:
    """The first way ``pattern`` matches with ``node`` as its root, or None."""
    if pattern.output_index >= len(node.outputs) or not _may_match(pattern, node):
        return None
    flat, inputs = (pattern.flat_names if isinstance(pattern, NodePattern) else None), node.inputs
    if flat is not None and node.op in pattern.ops and None not in inputs:
        named = {pattern.name: node} if pattern.name else {}
        return Match(node, dict(zip(flat, inputs, strict=False)), named, [node], {})
    for binding in _match(pattern, node.outputs[pattern.output_index], {}):
        values = {k: v for k, v in binding.items() if isinstance(k, str)}
        nodes = {p: n for p, n in binding.items() if isinstance(p, NodePattern)}
        named = {p.name: n for p, n in nodes.items() if p.name}
        tags = {p.tag: label for p, label in binding.items() if isinstance(p, Either)}
        return Match(node, values, named, list(dict.fromkeys(nodes.values())), tags)
    return None


def _may_match(pattern: NodePattern | Either, node: Node) -> bool:
    """A necessary condition, checked without the generators of ``_match``: the root's input count
    and attributes fit, and each input that the pattern wants from a node comes from a node of one
    of its ops (in either order for add and mul). Most candidates of a rule fail here, most often
    on the producers, which are therefore checked first."""
    if isinstance(pattern, Either):
        return any(_may_match(p, node) for p in pattern.alternatives.values())
    inputs = node.inputs
    if len(inputs) not in pattern.counts:
        return False
    wants = pattern.producer_wants
    if wants and len(inputs) < len(pattern.inputs):  # (optional inputs left out: absent)
        inputs = inputs + (None,) * (len(pattern.inputs) - len(inputs))
    if (
        wants
        and not _producers_fit(wants, inputs, False)
        and not (node.op in COMMUTATIVE and len(pattern.inputs) == 2 and _producers_fit(wants, inputs, True))
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
    if isinstance(pattern, Either):  # (met again: the alternative taken the first time)
        labels = [binding[pattern]] if pattern in binding else pattern.alternatives
        for label in labels:
            yield from _match(pattern.alternatives[label], value, {**binding, pattern: label}, reader)
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
    inputs = node.inputs
    if node.op not in pattern.ops or value.index != pattern.output_index or len(inputs) not in pattern.counts:
        return
    if not all(_attr_matches(node.attrs.get(k), want) for k, want in pattern.attrs.items()):
        return
    if len(inputs) < len(pattern.inputs):  # (optional inputs left out: absent)
        inputs += (None,) * (len(pattern.inputs) - len(inputs))
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
