"""IR → torch.export. Untouched calls are written back exactly as they were loaded.

The new ExportedProgram keeps the original's placeholders (parameters, buffers, constants, user inputs,
in order), state dict, constants, range constraints (so dynamic dims stay dynamic), module call graph,
example inputs and verifiers (buffers the program writes are copied). Tensors a pass created become
parameters or buffers (``torch_export_state``): computed once, stored in the program, never recomputed
per call, and moved, saved and loaded with the module as the original's state is.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path

import torch
from torch import fx
from torch.export.graph_signature import ExportGraphSignature, InputKind, OutputSpec
from torch.fx.node import map_aggregate

from ..files.atomic import atomic_target
from ..frontends.fx_source import FxGroup, PlaceholderSource, Ref
from ..frontends.torch_state import detached_state
from ..ir import Graph, GraphError
from .aten_emit import emit
from .fx_build import FxBuilder
from .torch_export_state import state_notes


def to_exported_program(graph: Graph) -> torch.export.ExportedProgram:
    program: torch.export.ExportedProgram | None = graph.meta.get("torch_program")
    if program is None:
        raise GraphError("torch backend: the graph was not loaded from a torch.export program")
    builder = FxBuilder(graph, program)
    builder.add_placeholders()
    intact: dict[FxGroup, bool] = {}
    written: set[FxGroup] = set()
    for node in graph:
        source = node.source
        if isinstance(source, PlaceholderSource):
            continue
        if isinstance(source, FxGroup):
            if source in written:
                continue
            if source not in intact:
                intact[source] = source.intact(graph) and builder.group_ready(source)
            if intact[source]:
                builder.emit_group(source)
                written.add(source)
                continue
        emit(builder, node)
    names = _write_output(builder, graph)
    dropped = _drop_unused_constants(builder, graph, program)
    optimized = _assemble(builder, program, names, dropped)
    graph.meta.setdefault("notes", []).extend(state_notes(program, optimized, builder.state.made))
    return optimized


def save_pt2(
    program: torch.export.ExportedProgram, path: str | os.PathLike, extra_files: dict[str, str] | None = None
) -> Path:
    """Writes the program with torch.export.save, atomically (temporary file, then rename), with the
    input archive's extra files."""
    with atomic_target(path) as temp, open(temp, "wb") as stream:
        torch.export.save(program, stream, extra_files=extra_files)
    return Path(path)


def _write_output(builder: FxBuilder, graph: Graph) -> list[str | None]:
    """The output node, in the original's structure; returns the name of each (flat) output's node."""
    template = graph.meta["torch_outputs"]

    def resolve(a):
        return builder.arg(graph.outputs[a.input]) if isinstance(a, Ref) else a

    results = map_aggregate(template, resolve)
    output = builder.fx.output(results)
    output.meta = dict(graph.meta.get("torch_output_meta", {}))
    return [a.name if isinstance(a, fx.Node) else None for a in _flat(results)]


def _flat(args) -> list:
    flat: list = []
    map_aggregate(args, lambda a: flat.append(a) or a)
    return flat


def _drop_unused_constants(builder: FxBuilder, graph: Graph, program) -> set[str]:
    """Targets of parameters, buffers and constants that the passes left unread and the IR dropped.

    They go from the signature, the state dict and the constants, as unread initializers go from an
    ONNX model: a pass that replaced a weight by a transformed copy must not leave the model twice as
    large. Without passes (or without remove_dead_nodes) the IR keeps them, and so does the program.
    """
    held = graph.meta["torch_placeholders"]
    mutated = {spec.target for spec in program.graph_signature.output_specs if spec.target}
    kept, dropped = set(), set()
    for spec in program.graph_signature.input_specs:
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            continue
        node = builder.placeholders[spec.arg.name]
        if node.users or spec.target in mutated or _in_graph(graph, held.get(spec.arg.name)):
            kept.add(spec.target)
            continue
        builder.fx.erase_node(node)
        dropped.add(spec.target)
    return dropped - kept


def _in_graph(graph: Graph, value) -> bool:
    if value is None:
        return False
    if value.producer is not None:
        return value.producer.graph is graph
    return graph.constants.get(value.name) is value


def _assemble(builder: FxBuilder, program, names: list[str | None], dropped: set[str]):
    old_specs = {s.arg.name: s for s in program.graph_signature.input_specs if hasattr(s.arg, "name")}
    input_specs = []
    for node in builder.fx.find_nodes(op="placeholder"):
        input_specs.append(builder.new_specs.get(node.name) or old_specs[node.name])
    old_specs_out = program.graph_signature.output_specs
    output_specs = [_renamed_output(spec, name) for spec, name in zip(old_specs_out, names, strict=True)]
    old_names = [getattr(spec.arg, "name", None) for spec in old_specs_out]
    renamed = {old: new for old, new in zip(old_names, names, strict=True) if old and new and old != new}
    module = fx.GraphModule(program.graph_module, builder.fx)
    _own_subgraphs(module)
    module.meta.update(copy.copy(program.graph_module.meta))
    call_graph = [_renamed_entry(entry, renamed) for entry in program.module_call_graph]
    # The buffers the program writes are copied: the optimized program has state of its own.
    state_dict = detached_state(program, {k: v for k, v in program.state_dict.items() if k not in dropped})
    constants = detached_state(program, {k: v for k, v in program.constants.items() if k not in dropped})
    for made in builder.state.made:
        (state_dict if made.persistent is not False else constants)[made.target] = made.tensor
    return torch.export.ExportedProgram(
        root=module,
        graph=module.graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict,
        range_constraints=copy.copy(program.range_constraints),
        module_call_graph=call_graph,
        example_inputs=program.example_inputs,
        constants=constants,
        verifiers=list(program.verifiers),
    )


def _own_subgraphs(module: fx.GraphModule) -> None:
    """The subgraph modules of higher-order ops (``wrap_with_set_grad_enabled``, ``cond``...) become the
    optimized program's own copies: shared with the input program, a pass that rewrites one of them in
    place (torch's ``move_to_device_pass`` does) would change both. In them, as in the top graph
    (frontends/aten_conversions.py), a conversion to the device a value was traced on is the cast it
    was, and a metadata assert of its traced dtype goes: both would pin the traced device, so that the
    module failed after a ``.to(device)``."""
    for name, child in list(module.named_children()):
        if not isinstance(child, fx.GraphModule):
            continue
        own = copy.deepcopy(child)
        for sub in own.modules():
            if isinstance(sub, fx.GraphModule) and (
                _drop_metadata_asserts(sub.graph) | _unpin_traced_device(sub.graph)
            ):
                sub.recompile()
        setattr(module, name, own)


def _drop_metadata_asserts(graph: fx.Graph) -> bool:
    dropped = False
    for node in graph.find_nodes(op="call_function", target=torch.ops.aten._assert_tensor_metadata.default):
        value = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], fx.Node) else None
        kwargs = node.kwargs
        plain = kwargs.get("size") is None and kwargs.get("stride") is None and len(node.args) == 1
        if not node.users and plain and value is not None and kwargs.get("dtype") == value.dtype:
            graph.erase_node(node)
            dropped = True
    return dropped


def _unpin_traced_device(graph: fx.Graph) -> bool:
    aten = torch.ops.aten
    changed = False
    for node in graph.nodes:
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
            continue
        value = node.args[0].meta.get("val")
        traced = getattr(value, "device", None)
        if node.target in (aten._to_copy.default, aten.to.dtype_layout):
            device = node.kwargs.get("device")
            if device is not None and torch.device(device) == traced:
                node.kwargs = {k: v for k, v in node.kwargs.items() if k != "device"}
                changed = True
        elif node.target is aten.to.device and len(node.args) >= 3 and torch.device(node.args[1]) == traced:
            node.target = aten.to.dtype
            node.args = (node.args[0], *node.args[2:])
            changed = True
    return changed


def _renamed_entry(entry, renamed: dict[str, str]):
    """A module call entry whose signature names the outputs as they are now called (shared, not
    copied, where nothing changed: copying tree specs is slow and warns in recent torch)."""
    signature = entry.signature
    if signature is None or not any(getattr(a, "name", None) in renamed for a in signature.outputs):
        return entry
    outputs = [
        dataclasses.replace(a, name=renamed[a.name]) if getattr(a, "name", None) in renamed else a
        for a in signature.outputs
    ]
    return dataclasses.replace(entry, signature=dataclasses.replace(signature, outputs=outputs))


def _renamed_output(spec: OutputSpec, name: str | None) -> OutputSpec:
    if name is None or getattr(spec.arg, "name", name) == name:
        return spec
    return dataclasses.replace(spec, arg=dataclasses.replace(spec.arg, name=name))
