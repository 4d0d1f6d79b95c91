"""IR → ONNX. Untouched nodes, values and constants are written back exactly as they were loaded."""

from __future__ import annotations

import functools

import onnx
from onnx import helper, numpy_helper

from ..frontends.onnx import _attribute_graphs, _captured_names
from ..fused.spec import DOMAIN as FUSED_DOMAIN
from ..ir import Graph, Node, Value
from .onnx_emit import Emitter

DEFAULT_OPSET = 18


def to_onnx(graph: Graph) -> onnx.ModelProto:
    source: onnx.ModelProto | None = graph.meta.get("onnx_model")
    opset = graph.meta.get("opset", {}).get("", DEFAULT_OPSET)
    model = _model_shell(source, graph, opset)
    out = model.graph
    emitter = Emitter(graph, opset, _gone_names(source, graph))
    original = source.graph if source is not None else None

    _write_inputs(graph, original, out)
    for value in graph.constants.values():
        out.initializer.append(_tensor_proto(value))
    if original is not None:
        out.sparse_initializer.extend(original.sparse_initializer)
    for node in graph:
        if node.source is not None:
            out.node.append(_verbatim(node))
        else:
            emitter.emit(node)
            out.node.extend(emitter.nodes)
            emitter.nodes.clear()
    out.initializer.extend(emitter.initializers)
    _write_outputs(graph, original, out)
    _write_value_info(graph, original, out)
    if any(n.domain == FUSED_DOMAIN for n in out.node):
        from ..fused.onnx_functions import attach_functions

        attach_functions(model)
    return model


def _gone_names(source: onnx.ModelProto | None, graph: Graph) -> set[str]:
    """Names of the source's top-level values (inputs, initializers, node outputs) that no value of the
    graph has any more: free to write again. (ONNX names are unique across scopes, so none of them is a
    subgraph's.)"""
    if source is None:
        return set()
    top = source.graph
    names = {v.name for v in top.input} | {t.name for t in top.initializer}
    names.update(out for node in top.node for out in node.output)
    return names - {v.name for v in graph.values()} - {""}


def _model_shell(source: onnx.ModelProto | None, graph: Graph, opset: int) -> onnx.ModelProto:
    """A model with every field of the source except the graph's contents."""
    model = onnx.ModelProto()
    if source is None:
        model.ir_version = 10
        model.producer_name = "graphopt"
        opsets = graph.meta.get("opset", {"": opset})
        model.opset_import.extend(helper.make_opsetid(d, v) for d, v in opsets.items())
        model.graph.name = graph.name
        return model
    _copy_fields(source, model, skip={"graph"})
    _copy_fields(
        source.graph,
        model.graph,
        skip={"node", "initializer", "sparse_initializer", "input", "output", "value_info"},
    )
    return model


def _copy_fields(source, target, skip: set[str]) -> None:
    for field, value in source.ListFields():
        if field.name in skip:
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if repeated:
            getattr(target, field.name).extend(value)
        elif field.message_type is not None:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def _write_inputs(graph: Graph, original: onnx.GraphProto | None, out: onnx.GraphProto) -> None:
    declared = {info.name: info for info in original.input} if original is not None else {}
    for value in graph.inputs:
        out.input.append(declared.get(value.name) or _value_info(value))
        default = value.meta.get("onnx_initializer")
        if default is not None:
            out.initializer.append(default)


def _write_outputs(graph: Graph, original: onnx.GraphProto | None, out: onnx.GraphProto) -> None:
    declared = list(original.output) if original is not None else []
    for index, value in enumerate(graph.outputs):
        info = declared[index] if index < len(declared) else _value_info(value)
        if value.name != info.name:
            # The value that now computes this output carries another name (it is an input, a constant
            # or another output): keep the model's interface with an Identity.
            out.node.append(
                helper.make_node("Identity", [value.name], [info.name], name=f"{info.name}/output")
            )
        out.output.append(info)


def _write_value_info(graph: Graph, original: onnx.GraphProto | None, out: onnx.GraphProto) -> None:
    # New values get their types written, so runtimes need no shape inference to place them.
    new = {
        v.name: v
        for node in graph
        if node.source is None
        for v in node.outputs
        if v.dtype is not None and not graph.is_output(v)
    }
    if original is not None and original.value_info:  # (most exported models declare none)
        # The source's entries, in its order, for values that still exist; a value written anew takes
        # its entry's place. Each value is declared once, so an optimized model optimized again
        # declares what it declared, in the same order.
        live = {v.name for v in graph.values()}
        written: set[str] = set()
        for info in original.value_info:
            name = info.name
            if name in written or name not in live:
                continue
            written.add(name)
            value = new.pop(name, None)
            out.value_info.append(info if value is None else _value_info(value))
    out.value_info.extend(_value_info(v) for v in new.values())


def _value_info(value: Value) -> onnx.ValueInfoProto:
    elem = value.dtype.onnx if value.dtype is not None else onnx.TensorProto.UNDEFINED
    info = onnx.ValueInfoProto()
    info.name = value.name
    info.type.CopyFrom(_tensor_type(elem, None if value.shape is None else tuple(value.shape)))
    return info


@functools.lru_cache(maxsize=4096)
def _tensor_type(elem: int, shape: tuple | None) -> onnx.TypeProto:
    """The TypeProto of a tensor value (what make_tensor_value_info writes), built once per type: a
    graph's new values share a few. Only ever copied from, never changed."""
    return helper.make_tensor_type_proto(elem, None if shape is None else list(shape))


def _tensor_proto(value: Value) -> onnx.TensorProto:
    tensor = value.const
    source = tensor.source
    if isinstance(source, onnx.TensorProto) and source.name == value.name:
        return source
    return numpy_helper.from_array(tensor.numpy(), value.name)


def _verbatim(node: Node) -> onnx.NodeProto:
    proto: onnx.NodeProto = node.source
    explicit = node.meta["explicit_inputs"]
    omitted = node.meta["omitted_outputs"]
    read = node.inputs
    inputs = ["" if v is None else v.name for v in read[:explicit]]
    outputs = ["" if i in omitted else v.name for i, v in enumerate(node.outputs)]
    captured_now = [v.name for v in read[explicit:]]
    captured_then = _captured_names(proto) if captured_now else []
    # (a protobuf repeated field compares equal to a list of the same items)
    if inputs == proto.input and outputs == proto.output and captured_now == captured_then:
        return proto
    copy = onnx.NodeProto()
    copy.CopyFrom(proto)
    del copy.input[:]
    copy.input.extend(inputs)
    del copy.output[:]
    copy.output.extend(outputs)
    renames = {a: b for a, b in zip(captured_then, captured_now, strict=True) if a != b}
    if renames:
        for attribute in copy.attribute:
            for sub in _attribute_graphs(attribute):
                _rename_reads(sub, renames)
    return copy


def _rename_reads(graph: onnx.GraphProto, renames: dict[str, str]) -> None:
    """Points a subgraph's reads of outer values at their new names (ONNX names are unique across scopes)."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
        for attribute in node.attribute:
            for sub in _attribute_graphs(attribute):
                _rename_reads(sub, renames)
    for output in graph.output:
        if output.name in renames:
            output.name = renames[output.name]
