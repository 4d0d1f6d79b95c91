"""torch.export → IR. Every FX call keeps its record (fx_source), so a round trip with no pass loses nothing.

User inputs become graph inputs (named as their placeholders), parameters, buffers and lifted constants
become graph constants whose tensors are read only when a pass asks. Dims come from each node's
``meta["val"]``: ints, or the names of symbolic dims ("s0"). Calls the translation table knows become
canonical ops (aten_ops); all others are carried verbatim as ``aten:<op>`` nodes.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import torch
from torch import fx
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

from ..errors import BadInput
from ..ir import DType, Graph, Tensor, Value, opaque_name
from .aten_inplace import functional_forms
from .fx_source import Attr, PlaceholderSource, Ref
from .pt2_read import read_pt2
from .torch_arrays import to_numpy
from .torch_calls import Env, read_call, value_type
from .torch_evaluate import dtype_only_inputs, evaluate_torch_node, evaluate_torch_region
from .torch_state import mutated_targets

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def load_pt2(path) -> torch.export.ExportedProgram:
    """The ExportedProgram of a ``torch.export.save`` archive; BadInput names what is wrong with it."""
    return read_pt2(path)


def user_input_names(program: torch.export.ExportedProgram) -> list[str]:
    """Placeholder names of the program's user inputs, in call order."""
    return [s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]


def call_arguments(program: torch.export.ExportedProgram, tensors: Mapping[str, Any]) -> tuple[tuple, dict]:
    """``(args, kwargs)`` for ``program.module()``: tensors by placeholder name, the non-tensor inputs the
    program was exported with (which it has specialized on), in the structure of the original call."""
    flat = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            constant = isinstance(spec.arg, ConstantArgument)
            flat.append(spec.arg.value if constant else tensors[spec.arg.name])
    return pytree.tree_unflatten(flat, program.call_spec.in_spec)


def from_exported_program(program: torch.export.ExportedProgram) -> Graph:
    """Loads an ExportedProgram (not modified, and kept by reference) into a Graph."""
    if not isinstance(program, torch.export.ExportedProgram):
        raise BadInput(f"expected a torch.export.ExportedProgram, got a {type(program).__name__}")
    return _Reader(program).read()


class _Reader:
    def __init__(self, program: torch.export.ExportedProgram):
        self.program = program
        self.fx_graph = program.graph_module.graph
        self.graph = Graph("main")
        self.env: Env = {}
        # placeholder name -> the IR value holding a parameter, buffer, constant or custom object
        self.held: dict[str, Value] = {}
        self.specs = {s.arg.name: s for s in program.graph_signature.input_specs if hasattr(s.arg, "name")}
        self.written = mutated_targets(program)  # state, not constants: nothing is folded from them

    def read(self) -> Graph:
        graph = self.graph
        graph.meta.update(
            frontend="torch",
            torch_program=self.program,
            evaluate=evaluate_torch_node,
            evaluate_region=evaluate_torch_region,
            dtype_only_inputs=dtype_only_inputs,
        )
        graph.meta["torch_placeholders"] = self.held
        functional = functional_forms(self.fx_graph)
        for node in self.fx_graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "get_attr":
                self.env[node] = Attr(node.target, node.name)
            elif node.op == "call_function":
                if not self._folded_getitem(node):
                    read_call(self.graph, self.env, node, functional.get(node))
            elif node.op == "output":
                self._outputs(node)
            else:
                raise BadInput(
                    f"the exported program has a {node.op} node {node.name!r}; expected aten calls"
                )
        return graph

    # ----- placeholders and outputs --------------------------------------------------------------
    def _placeholder(self, node: fx.Node) -> None:
        spec = self.specs.get(node.name)
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind == InputKind.USER_INPUT and isinstance(node.meta.get("val"), torch.Tensor):
            self.env[node] = self.graph.add_input(node.name, *value_type(node.meta.get("val")))
            return
        constant = kind in _CONSTANT_KINDS and spec.target not in self.written
        tensor = self._lifted_tensor(spec) if constant else None
        dtype = DType.from_torch(tensor.dtype) if isinstance(tensor, torch.Tensor) else None
        if dtype is None:  # a custom object, a token, a written buffer, a non-tensor input, a tensor of a
            # dtype the IR lacks
            outputs = [(node.name, *value_type(node.meta.get("val")))]
            ir_node = self.graph.add_node(opaque_name("aten", "placeholder"), [], outputs=outputs)
            ir_node.source = PlaceholderSource(node.name)
            ir_node.meta["side_effects"] = True  # stands for an input: nothing to fold or remove
            self.env[node] = self.held[node.name] = ir_node.output
            return
        value = self.graph.add_constant(_lazy_tensor(tensor, dtype), node.name)
        self.env[node] = self.held[node.name] = value

    def _lifted_tensor(self, spec) -> Any:
        program = self.program
        if spec.target in program.state_dict:
            return program.state_dict[spec.target]
        return program.constants.get(spec.target)

    def _outputs(self, node: fx.Node) -> None:
        values: list[Value] = []

        def collect(arg: fx.Node):
            value = self.env[arg]
            if not isinstance(value, Value):
                raise BadInput(f"the program returns {arg.name!r}, which is not a value")
            values.append(value)
            return Ref(0, len(values) - 1)  # graph output number len(values) - 1

        self.graph.meta["torch_outputs"] = fx.node.map_arg(node.args[0], collect)
        self.graph.meta["torch_output_meta"] = dict(node.meta)
        self.graph.set_outputs(values)

    def _folded_getitem(self, node: fx.Node) -> bool:
        source = node.args[0] if node.target is operator.getitem else None
        folded = self.env.get(source) if isinstance(source, fx.Node) else None
        if isinstance(folded, list):
            self.env[node] = folded[node.args[1]]
            return True
        return False


def _lazy_tensor(tensor: torch.Tensor, dtype: DType) -> Tensor:
    return Tensor(dtype, tuple(tensor.shape), loader=lambda: to_numpy(tensor), source=tensor)
