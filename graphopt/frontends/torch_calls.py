"""One FX call → its IR node(s), with the FxGroup that lets the backend write the call back verbatim.

A call whose result is a tuple read only through ``getitem`` becomes one IR node with an output per
element; the getitem nodes fold into it (and are written back with their own names and meta).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch
from torch import fx
from torch.fx.node import map_aggregate

from ..ir import DType, Graph, Node, Shape, Tensor, Value, opaque_name
from .aten_inplace import InPlaceCall
from .aten_members import INTERNAL, Internal, Member, Scalar
from .aten_ops import translate
from .aten_slots import EMPTY, SlottedCall, keeps_slots, slot_attributes, with_slots
from .fx_source import Attr, FxCall, FxGroup, Ref

# What an FX node stands for in the IR: a value, a tuple of values (folded getitems), a subgraph module.
Env = dict[fx.Node, Value | list[Value | None] | Attr]


def value_type(val: Any) -> tuple[DType | None, Shape | None]:
    if not isinstance(val, torch.Tensor):
        return None, None
    dims = tuple(d if type(d) is int else str(d) for d in val.shape)
    return DType.from_torch(val.dtype), dims


def read_call(graph: Graph, env: Env, node: fx.Node, target: Any = None) -> None:
    """Adds the IR node(s) of call ``node`` and records in ``env`` what the call's result is.
    ``target``: the op to read the call as (the functional form of an in-place call, aten_inplace),
    which is also the op the backend writes; by default the call's own."""
    target = node.target if target is None else target
    members = None
    foldable = _results(node) != [None] or not isinstance(node.meta.get("val"), list | tuple)
    if isinstance(target, torch._ops.OpOverload) and foldable:
        members = translate(node, target)
    group = _canonical(graph, env, node, members, target) if members else None
    if group is None:
        group = _opaque(graph, env, node, target)
    if target is not node.target:  # (an in-place call read as its functional form)
        group.calls[0] = InPlaceCall(group.calls[0], node.target, group.members[0])
    mutates = _mutates(target)
    # (a call nothing reads stays only for its effect: an assertion, a write, a draw of random numbers;
    # a pure call nothing reads is dead code, which torch.export leaves in its graphs)
    side_effects = mutates or (not node.users and node.is_impure())
    aliases = _returns_alias(target)
    for member in group.members:
        member.source = group
        if side_effects:
            member.meta["side_effects"] = True
        if mutates:
            member.meta["mutates"] = True  # (writes its first input in place)
        if aliases:
            member.meta["aliases_input"] = True


def _opaque(graph: Graph, env: Env, node: fx.Node, target: Any) -> FxGroup:
    inputs: list[Value | None] = []

    def ref(arg: Any):
        if arg is EMPTY:
            inputs.append(None)  # an absent optional tensor that keeps its slot (aten_slots)
            return Ref(0, len(inputs) - 1)
        if not isinstance(arg, fx.Node):
            return arg
        value = env[arg]
        if isinstance(value, Attr):
            return value
        inputs.append(value)  # a list only for a folded tuple, which only getitem reads
        return Ref(0, len(inputs) - 1)

    slotted = keeps_slots(target)
    call_args = with_slots(node, target) if slotted else (node.args, node.kwargs)
    args, kwargs = map_aggregate(call_args, ref)
    attrs = slot_attributes(node, target) if slotted else {}
    results = _results(node)
    outputs = [(_output_name(graph, node, item), *value_type(_val(node, item))) for item in results]
    ir_node = graph.add_node(_opaque_op(target), inputs, attrs, outputs=outputs, name=node.name)
    env[node] = ir_node.output if results == [None] else list(ir_node.outputs)
    call = FxCall(target, args, kwargs, node.name, dict(node.meta), _items(node))
    if len(args) > len(node.args):  # (empty slots added for left-out optional tensors)
        call = SlottedCall(call, len(node.args), ir_node)
    return FxGroup([call], [ir_node], [[(0, item) for item in results]], [], [{}])


def _canonical(graph: Graph, env: Env, node: fx.Node, members: list[Member], target: Any) -> FxGroup | None:
    refs: dict[fx.Node, Ref] = {}  # each FX argument node → the first member input that reads it
    for m, member in enumerate(members):
        for k, arg in enumerate(member.inputs):
            if isinstance(arg, fx.Node):
                if not isinstance(env.get(arg), Value):
                    return None  # reads a tuple or a subgraph module: keep the call verbatim
                refs.setdefault(arg, Ref(m, k))
    try:
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), refs.__getitem__)
    except KeyError:
        return None  # an argument node the canonical form does not read (a SymInt size)
    group = FxGroup([FxCall(target, args, kwargs, node.name, dict(node.meta), _items(node))])
    produced: list[Value] = []
    for m, member in enumerate(members):
        ir_node = _member(graph, env, node, member, group)
        group.members.append(ir_node)
        group.produced.append([None if r == INTERNAL else (0, r) for r in member.results])
        group.fixed.append({})
        for k, arg in enumerate(member.inputs):
            if isinstance(arg, Internal):
                group.internal.append((m, k, arg.member, arg.output))
            elif isinstance(arg, Scalar):
                group.fixed[m][k] = ir_node.input(k)
        produced += [v for r, v in zip(member.results, ir_node.outputs, strict=True) if r != INTERNAL]
    items = [r for member in members for r in member.results if r != INTERNAL]
    if items == [None]:
        env[node] = produced[0]
    elif items:
        folded: list[Value | None] = [None] * (max(items) + 1)
        for item, value in zip(items, produced, strict=True):
            folded[item] = value
        env[node] = folded
    return group


def _member(graph: Graph, env: Env, node: fx.Node, member: Member, group: FxGroup) -> Node:
    inputs = []
    for arg in member.inputs:
        if isinstance(arg, Internal):
            inputs.append(group.members[arg.member].outputs[arg.output])
        elif isinstance(arg, Scalar):
            array = np.asarray(arg.value, dtype=arg.dtype.numpy)
            inputs.append(graph.add_constant(Tensor.from_array(array, arg.dtype), f"{node.name}/scalar"))
        else:
            inputs.append(None if arg is None else env[arg])
    # (types of a member the group itself consumes follow from the canonical shape rules)
    if member.results and all(r == INTERNAL for r in member.results):
        return graph.add_node(member.op, inputs, member.attrs, name=f"{node.name}/{member.op}")
    outputs = [(_output_name(graph, node, r), *value_type(_val(node, r))) for r in member.results]
    return graph.add_node(member.op, inputs, member.attrs, outputs=outputs, name=node.name)


def _results(node: fx.Node) -> list[int | None]:
    """Per IR output, the element of the call's result it is; [None] for the whole value."""
    val = node.meta.get("val")
    if isinstance(val, list | tuple) and all(
        u.target is operator.getitem and type(u.args[1]) is int for u in node.users
    ):
        return list(range(len(val)))
    return [None]


def _val(node: fx.Node, item: int | None) -> Any:
    return node.meta.get("val") if item is None else node.meta["val"][item]


def _items(node: fx.Node) -> dict[int, tuple[str, dict]]:
    return {
        u.args[1]: (u.name, dict(u.meta))
        for u in node.users
        if u.target is operator.getitem and type(u.args[1]) is int
    }


def _output_name(graph: Graph, node: fx.Node, item: int | None) -> str:
    if item is None:
        return node.name
    for user in node.users:
        if user.target is operator.getitem and user.args[1] == item:
            return user.name
    # "/" cannot occur in FX names, so a made-up name never takes a later node's
    return graph.fresh_name(f"{node.name}/{item}")


def _opaque_op(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        prefix = "" if target.namespace == "aten" else f"{target.namespace}."
        return opaque_name("aten", f"{prefix}{target._opname}.{target._overloadname}")
    if isinstance(target, torch._ops.HigherOrderOperator):
        return opaque_name("aten", f"higher_order.{target.name()}")
    module = (getattr(target, "__module__", None) or "").strip("_")
    name = getattr(target, "__name__", str(target))
    return opaque_name("aten", f"{module}.{name}" if module else name)


def _mutates(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def _returns_alias(target: Any) -> bool:
    """Whether the call's result may share memory with an argument (a view: ``view``, ``permute``,
    ``select``, ``expand``...), as its schema says; unknown callables are assumed to."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return not isinstance(target, torch._ops.OpOverload) and target is not operator.getitem
    return any(r.alias_info is not None for r in schema.returns)
