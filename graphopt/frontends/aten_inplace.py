"""Which in-place calls (``relu_``, ``hardswish_``, ``add_``...) may be read as their functional form.

torch.export keeps the in-place calls of the model's code (``nn.ReLU(inplace=True)``, ``x += y``). To
the IR such a call is opaque: it writes its first argument, so no pass may move, merge or fold around
it. Read as the functional op (``relu``, ``add``), it is an ordinary node that passes understand.

The rule: ``op_(x)`` becomes ``op(x)`` when nothing observes the write, that is when no tensor that
may share memory with ``x`` (``x`` itself, the views it was taken from, the views taken of it, earlier
in-place results on it) is read after the call, and none of them is a placeholder (a parameter,
buffer or user input, whose mutation the caller sees) or a program output. Then the value before the
write is dead once the call runs, and computing the result into a fresh tensor is the same program.
When anything reads the memory later (``mask[:2].fill_(1)`` and then ``x * mask``), the functional
form would compute something else, so the call stays verbatim and opaque. The functional form is
also what the backend writes: once passes have run, a value the in-place call would overwrite may
have gained readers (two equal values merged into one), and only the functional call stays right.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import fx

from ..ir import Node
from .fx_source import FxCall


def functional_forms(graph: fx.Graph) -> dict[fx.Node, torch._ops.OpOverload]:
    """The in-place calls of ``graph`` whose write nothing observes, each with its functional overload."""
    nodes = list(graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    classes = _alias_classes(nodes)
    members: dict[fx.Node, list[fx.Node]] = {}
    for node in nodes:
        members.setdefault(classes.find(node), []).append(node)
    found = {}
    for node in nodes:
        functional = functional_overload(node.target) if node.op == "call_function" else None
        if functional is None or not isinstance(node.args[0] if node.args else None, fx.Node):
            continue
        written = members[classes.find(node.args[0])]
        if all(_unobserved_after(m, node, position) for m in written):
            found[node] = functional
    return found


def functional_overload(target: Any) -> torch._ops.OpOverload | None:
    """``aten.relu.default`` for ``aten.relu_.default``: the overload of the same name without the
    trailing underscore, taking the same arguments, for a call that writes its first argument only."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable or not isinstance(target, torch._ops.OpOverload):
        return None
    name = target._opname
    writes = [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments]
    if not name.endswith("_") or name.startswith("_") or writes[:1] != [True] or any(writes[1:]):
        return None
    packet = getattr(getattr(torch.ops, target.namespace), name[:-1], None)
    functional = getattr(packet, target._overloadname, None) if packet is not None else None
    if not isinstance(functional, torch._ops.OpOverload) or functional._schema.is_mutable:
        return None
    # (the same arguments; the first may be named differently: dropout_(self, ...), dropout(input, ...))
    names, functional_names = (
        [a.name for a in schema.arguments],
        [a.name for a in functional._schema.arguments],
    )
    if len(names) != len(functional_names) or names[1:] != functional_names[1:]:
        return None
    return functional


def _unobserved_after(member: fx.Node, call: fx.Node, position: dict[fx.Node, int]) -> bool:
    if member.op in ("placeholder", "get_attr", "output"):
        return False  # the caller's tensor (or what it gets back)
    if position[member] >= position[call]:
        return True  # the call's own result, or computed from it: sees the written values either way
    return all(position[user] <= position[call] for user in member.users)


class _UnionFind:
    def __init__(self):
        self.parent: dict[fx.Node, fx.Node] = {}

    def find(self, node: fx.Node) -> fx.Node:
        parent = self.parent.setdefault(node, node)
        if parent is not node:
            parent = self.parent[node] = self.find(parent)
        return parent

    def union(self, a: fx.Node, b: fx.Node) -> None:
        self.parent[self.find(a)] = self.find(b)


def _alias_classes(nodes: list[fx.Node]) -> _UnionFind:
    """Nodes that may share memory fall in one class: a call's result joins each argument its schema
    says it may alias (a view, an in-place write's result); calls without a schema (getitem, higher
    order ops) join all their arguments, which over-approximates and so only keeps more calls verbatim."""
    classes = _UnionFind()
    for node in nodes:
        classes.find(node)
        if node.op != "call_function":
            continue
        for argument in _aliased_arguments(node):
            classes.union(node, argument)
    return classes


def _aliased_arguments(node: fx.Node) -> list[fx.Node]:
    schema = getattr(node.target, "_schema", None)
    flat: list[fx.Node] = []
    if schema is None or not isinstance(node.target, torch._ops.OpOverload):
        fx.node.map_arg((node.args, node.kwargs), flat.append)
        return flat
    if not any(r.alias_info is not None for r in schema.returns):
        return []
    for i, argument in enumerate(schema.arguments):
        if argument.alias_info is None:
            continue
        value = node.args[i] if i < len(node.args) else node.kwargs.get(argument.name)
        fx.node.map_arg(value, flat.append)
    return flat


class InPlaceCall(FxCall):
    """An in-place call read as its functional form, and written back as it was (in place) while
    the value it writes has no other reader in the graph and comes from a call of the program that
    is no view, as when loaded; once a pass has given that value another reader (merged it with an
    equal value) or computes it itself, it is written as the functional call, which stays right
    whatever else reads the value."""

    def __init__(self, call: FxCall, in_place: torch._ops.OpOverload, member: Node):
        super().__init__(**{f.name: getattr(call, f.name) for f in dataclasses.fields(FxCall)})
        self.in_place = in_place
        self.member = member

    @property
    def target(self) -> Any:
        return self.in_place if _sole_writer(self.member) else self._functional

    @target.setter
    def target(self, functional: Any) -> None:
        self._functional = functional


def _sole_writer(member: Node) -> bool:
    written, graph = member.input(0), member.graph
    if graph is None or written is None or written.producer is None or graph.is_output(written):
        return False  # (a constant or an input: the caller's tensor)
    if written.producer.source is None or written.producer.meta.get("aliases_input"):
        # (a view shares its memory with other values; so may a node a pass made, which the backend
        # may write as a view: a reshape, a split)
        return False
    return len(written.uses) == 1
