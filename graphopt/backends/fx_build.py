"""Building the FX graph of an optimized program, node by node.

Placeholders come first, in the original program's order; tensors a pass created become parameters
or buffers (``torch_export_state`` says which), made the first time a node reads them. Every call
node made here gets ``meta["val"]`` from running its target on the inputs' fake values in the
program's own fake mode, so symbolic dims ("s0") flow through new nodes as they do through old ones.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.export.graph_signature import InputKind, InputSpec
from torch.fx.node import map_aggregate

from ..frontends.fx_source import Attr, FxGroup, Ref
from ..frontends.torch_arrays import to_torch
from ..ir import Graph, GraphError, Node, Value, constant_of
from .torch_export_state import StateKinds

_KIND_ORDER = (
    InputKind.TOKEN,
    InputKind.PARAMETER,
    InputKind.BUFFER,
    InputKind.CONSTANT_TENSOR,
    InputKind.CUSTOM_OBJ,
    InputKind.USER_INPUT,
)


class FxBuilder:
    def __init__(self, graph: Graph, program: torch.export.ExportedProgram):
        self.graph = graph
        self.program = program
        self.fx = fx.Graph()
        self.fx._codegen = program.graph_module.graph._codegen
        self.fake_mode = _fake_mode(program.graph_module.graph)
        self.env: dict[Value, Any] = {}
        self.placeholders: dict[str, fx.Node] = {}
        self.state = StateKinds(program, graph.meta["torch_placeholders"])
        self.new_specs: dict[str, InputSpec] = {}  # placeholder name -> spec
        self.placeholder_kinds: dict[fx.Node, InputKind] = {}
        self._attrs: dict[str, fx.Node] = {}
        self._dims: dict[tuple[fx.Node, int], Any] = {}
        self.rule: str | None = None  # the rule that made the node being emitted

    # ----- placeholders ----------------------------------------------------------------------------
    def add_placeholders(self) -> None:
        """The original program's placeholders, all of them, in order and under their names."""
        specs = self.program.graph_signature.input_specs
        kinds = {s.arg.name: s.kind for s in specs if hasattr(s.arg, "name")}
        for old in self.program.graph_module.graph.find_nodes(op="placeholder"):
            node = self.fx.placeholder(old.name)
            # FX renames what would shadow a Python builtin ("input"); deserialized programs keep such
            # names, and the signature refers to placeholders by name. The graph is still all
            # placeholders, whose names are unique, so the original name is free.
            node.name = old.name
            node.meta = dict(old.meta)
            self.placeholders[old.name] = node
            self.placeholder_kinds[node] = kinds.get(old.name, InputKind.USER_INPUT)
        for value in self.graph.inputs:
            self.env[value] = self.placeholders[value.name]
        for name, value in self.graph.meta["torch_placeholders"].items():
            self.env[value] = self.placeholders[name]

    def lifted_constant(self, value: Value) -> fx.Node:
        """The placeholder of a tensor a pass made (made once): a parameter or buffer as
        ``torch_export_state`` decides, or the original's own placeholder where it equals that."""
        node = self.env.get(value)
        if node is not None:
            return node
        tensor = _torch_tensor(constant_of(value))
        same = self.state.existing(value, tensor)
        if same is not None:
            node = self.env[value] = self.placeholders[same]
            return node
        state = self.state.new_state(value, tensor)
        with self._inserting_placeholder(state.kind):
            node = self.fx.placeholder(state.placeholder)
        state.placeholder = node.name  # (FX makes a name unique within the graph)
        node.meta["val"] = self.fake_mode.from_tensor(tensor, static_shapes=True)
        self.new_specs[node.name] = state.spec
        self.placeholders[node.name] = node
        self.placeholder_kinds[node] = state.kind
        self.env[value] = node
        return node

    def _inserting_placeholder(self, kind: InputKind):
        """Inserts a new placeholder of ``kind`` after those of its kind and the kinds before it, in
        torch.export's order (tokens, parameters, buffers, constants, custom objects, user inputs)."""
        rank = _KIND_ORDER.index(kind)
        last = None
        for node in self.fx.find_nodes(op="placeholder"):
            if _KIND_ORDER.index(self.placeholder_kinds[node]) > rank:
                return self.fx.inserting_before(node)
            last = node
        return self.fx.inserting_after(last) if last is not None else self.fx.inserting_before(None)

    # ----- reading IR values -------------------------------------------------------------------
    def arg(self, value: Value | None) -> Any:
        """The FX argument that reads ``value``."""
        if value is None:
            return None
        found = self.env.get(value)
        if found is not None:
            return found
        if constant_of(value) is not None:
            return self.lifted_constant(value)
        raise GraphError(f"torch backend: {value.name!r} is read before it is computed")

    def ready(self, value: Value | None) -> bool:
        return value is None or value in self.env or constant_of(value) is not None

    def dim(self, value: Value, axis: int) -> Any:
        """Dim ``axis`` of ``value``: an int, or a sym_size node for a symbolic dim."""
        node = self.arg(value)
        size = node.meta["val"].shape[axis]
        if type(size) is int:
            return size
        key = (node, axis)
        if key not in self._dims:
            name = f"{node.name}_size{axis}"
            self._dims[key] = self.call(torch.ops.aten.sym_size.int, (node, axis), name=name)
        return self._dims[key]

    # ----- making nodes ------------------------------------------------------------------------
    def call(self, target, args: tuple, kwargs: dict | None = None, *, name: str) -> fx.Node:
        """A new call node, with its fake value computed."""
        kwargs = kwargs or {}
        node = self.fx.create_node("call_function", target, tuple(args), kwargs, name=_clean(name))
        fake_args, fake_kwargs = map_aggregate((node.args, node.kwargs), _fake)
        # The Python dispatcher runs composite ops (matmul, linear) through their Python decompositions,
        # which understand symbolic sizes; torch 2.11's C++ kernels for them do not.
        with self.fake_mode, enable_python_dispatcher():
            node.meta["val"] = target(*fake_args, **fake_kwargs)
        if self.rule:
            node.meta["graphopt_rule"] = self.rule
        return node

    def getitem(self, node: fx.Node, index: int, name: str) -> fx.Node:
        return self.call(operator.getitem, (node, index), name=name)

    def bind(self, ir_node: Node, results: list[Any]) -> None:
        """Records what each output of ``ir_node`` is in the FX graph (and drops unread getitems)."""
        for value, result in zip(ir_node.outputs, results, strict=True):
            getter = isinstance(result, fx.Node) and result.target is operator.getitem
            if getter and not result.users and not self.graph.is_used(value):
                self.fx.erase_node(result)
                continue
            if result is not None:
                self.env[value] = result

    # ----- verbatim --------------------------------------------------------------------------------
    def group_ready(self, group: FxGroup) -> bool:
        return all(self.ready(group.members[r.member].input(r.input)) for r in group.external_refs())

    def emit_group(self, group: FxGroup) -> None:
        """Writes the group's calls back exactly as the program had them."""

        def resolve(a):
            if isinstance(a, Ref):
                return self.arg(group.members[a.member].input(a.input))
            if isinstance(a, Attr):
                return self._get_attr(a)
            return a

        results = []
        for call in group.calls:
            args, kwargs = map_aggregate((call.args, call.kwargs), resolve)
            node = self.fx.create_node("call_function", call.target, args, kwargs, name=call.name)
            node.meta = dict(call.meta)
            results.append(node)
        for m, member in enumerate(group.members):
            for o, produced in enumerate(group.produced[m]):
                value = member.outputs[o]
                if produced is None:
                    continue
                index, item = produced
                # getitems the program had are written back even if unread: torch.export keeps them
                if not self.graph.is_used(value) and item not in group.calls[index].items:
                    continue
                if item is None:
                    self.env[value] = results[index]
                    continue
                name, meta = group.calls[index].items.get(item, (value.name, None))
                if meta is None:
                    self.env[value] = self.getitem(results[index], item, name)
                else:
                    getter = self.fx.create_node(
                        "call_function", operator.getitem, (results[index], item), name=name
                    )
                    getter.meta = dict(meta)
                    self.env[value] = getter

    def _get_attr(self, attr: Attr) -> fx.Node:
        node = self._attrs.get(attr.target)
        if node is None:
            old = self.program.graph_module.graph.find_nodes(op="get_attr", target=attr.target)
            node = self.fx.create_node("get_attr", attr.target, name=attr.name)
            node.meta = dict(old[0].meta) if old else {}
            self._attrs[attr.target] = node
        return node


def _fake(a: Any) -> Any:
    return a.meta["val"] if isinstance(a, fx.Node) else a


def _clean(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"


def _fake_mode(graph: fx.Graph) -> FakeTensorMode:
    for node in graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, FakeTensor):
            return val.fake_mode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(shape_env=ShapeEnv())


def _torch_tensor(tensor) -> torch.Tensor:
    """The torch form of an IR constant: the program's own tensor, or one built from a pass's array."""
    if isinstance(tensor.source, torch.Tensor):
        return tensor.source
    return to_torch(tensor.numpy())
