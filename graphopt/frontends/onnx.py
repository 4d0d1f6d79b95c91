"""ONNX → IR. Every node keeps its NodeProto, so a round trip with no pass loses nothing."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import onnx

from ..errors import BadInput
from ..fused.spec import DOMAIN as FUSED_DOMAIN
from ..ir import DType, Graph, GraphError, Op, Shape, Tensor, Value, opaque_name
from .onnx_evaluate import evaluate_onnx_node
from .onnx_infer import infer_onnx_node
from .onnx_ops import translate
from .onnx_order import reordered, topological_order
from .onnx_read import check_external_data, check_model_proto
from .onnx_runtime_ops import runtime_only_nodes, unchecked
from .onnx_subgraphs import captured_names, has_subgraphs, names_inside
from .onnx_tensors import external_value, lazy_tensor, sparse_tensor
from .onnx_upgrade import is_too_old, upgrade_old_opset

log = logging.getLogger(__name__)

# Shape inference serializes the model it is given; below this many bytes of embedded weights it gets
# the model itself, above it a copy that declares the large weights as inputs instead of holding them.
PROBE_COPY_LIMIT = 64 << 20


def from_onnx(
    model: onnx.ModelProto,
    base_dir: str | Path | None = None,
    where: str = "model",
    path: Path | None = None,
    *,
    read_checked: bool = False,
) -> Graph:
    """Loads a ModelProto (not modified, and kept by reference) into a Graph.

    ``base_dir`` is where external data files lie (the model file's directory); ``path`` is the file the
    model was read from, if any (the checker resolves external data against it). ``read_checked``: the
    model comes from ``onnx_read.read_onnx``, which already made the checks on its header, tensors and
    external data (a walk over every tensor: worth doing once).
    """
    base = Path(base_dir) if base_dir is not None else None
    if not read_checked:
        check_model_proto(model, where)
        if base is not None:
            check_external_data(model, base, where)
    if any(f.domain == FUSED_DOMAIN for f in model.functions):
        from ..fused.onnx_own_functions import check_own_functions  # (the fallback builders: only here)

        check_own_functions(model, where)
    model, upgrade_note = upgrade_old_opset(model, where)
    types, inference_problem = _infer_types(model)
    onnx_graph = model.graph
    graph = Graph(onnx_graph.name or "main")
    graph.meta.update(
        frontend="onnx",
        onnx_model=model,
        opset={("" if e.domain == "ai.onnx" else e.domain): e.version for e in model.opset_import},
        base_dir=base,
        evaluate=evaluate_onnx_node,
        infer=infer_onnx_node,
    )
    if upgrade_note is not None:
        graph.meta.setdefault("notes", []).append(upgrade_note)
        if is_too_old(model):
            graph.meta["carry_through"] = upgrade_note
    # Each field of a NodeProto read through the protobuf API costs a wrapper: each is read once, here.
    protos = list(onnx_graph.node)
    nested = [has_subgraphs(node) for node in protos]
    for node in itertools.compress(protos, nested):
        for name in names_inside(node):
            graph.reserve_name(name)
    scope: dict[str, Value] = {}
    initializers = {t.name: t for t in onnx_graph.initializer}
    for info in onnx_graph.input:
        dtype, shape = _value_type(info.type) if info.type.HasField("tensor_type") else (None, None)
        value = graph.add_input(info.name, dtype, shape)
        if info.name in initializers:
            # A default that callers may override: an input, not a constant.
            value.meta["onnx_initializer"] = initializers.pop(info.name)
        scope[info.name] = value
    for name, tensor in initializers.items():
        value = graph.add_constant(lazy_tensor(tensor, base), name)
        if value.name != name:
            raise BadInput(f"{where}: initializer {name!r} is defined twice; expected unique value names")
        scope[name] = value
    for sparse in onnx_graph.sparse_initializer:
        dense = sparse_tensor(sparse)
        scope[sparse.values.name] = graph.add_constant(dense, sparse.values.name)
    # (None: every node carried verbatim, in a model too old to upgrade)
    opset = None if "carry_through" in graph.meta else graph.meta["opset"].get("", 0)
    captured = [captured_names(node) if inner else [] for node, inner in zip(protos, nested, strict=True)]
    inputs = [list(node.input) for node in protos]
    outputs = [list(node.output) for node in protos]
    declared = {info.name for info in (*onnx_graph.value_info, *onnx_graph.output)}
    const = _constants_in(scope)
    order = topological_order(protos, inputs, outputs, captured, set(scope), where)
    for index in order:
        proto = protos[index]
        names = (inputs[index], outputs[index], captured[index])
        _add_node(graph, proto, names, scope, const, types, opset, declared, base)
    missing = [o.name for o in onnx_graph.output if o.name not in scope]
    if missing:
        raise BadInput(
            f"{where}: graph output {missing[0]!r} is not produced by any node; expected a complete graph"
        )
    graph.set_outputs([scope[o.name] for o in onnx_graph.output])
    # (after our own structural checks, which name what is wrong more precisely)
    runtime_only = runtime_only_nodes(model)
    # (ONNX asks for nodes in topological order, runtimes do not: ONNX Runtime's own float16 converter
    # appends its input Casts last. The checker sees a copy in the order the graph was read in.)
    checked = reordered(model, order)
    unsorted = checked is not model
    external = graph.meta.pop("external_constants", False)
    with unchecked(checked, runtime_only_nodes(checked) if unsorted else runtime_only):
        _validate(checked, where, path, external, edited=bool(runtime_only) or unsorted)
    if runtime_only:
        names = ", ".join(sorted({n.op_type for n in runtime_only}))
        note = (
            f"{where}: {names} (ONNX Runtime's, in the ONNX domain, with no ONNX schema) carried verbatim; "
            "onnx.checker checked the rest of the model"
        )
        log.info("%s", note)
        graph.meta.setdefault("notes", []).append(note)
    if inference_problem:  # a note in the report (not a warning on stderr: the model may still be refused)
        note = f"ONNX shape inference failed ({inference_problem}); used the types the model declares"
        log.info("%s", note)
        graph.meta.setdefault("notes", []).append(note)
    return graph


def _add_node(
    graph: Graph,
    proto: onnx.NodeProto,
    names: tuple[list[str], list[str], list[str]],
    scope,
    const,
    types,
    opset: int | None,
    declared: set[str],
    base: Path | None,
) -> None:
    """Adds the node for ``proto``; ``names``: its input, output and captured value names."""
    external = external_value(proto) if opset is not None else None
    if external is not None:  # (read from its file when a pass needs it, as an initializer would be)
        translated = Op.CONSTANT, {"value": lazy_tensor(external, base)}
        graph.meta["external_constants"] = True
    else:
        try:  # (a model too old to upgrade is carried as it is: its ops read differently)
            translated = None if opset is None else translate(proto, opset, const)
        except Exception as error:  # a damaged node (a required attribute missing or mistyped): carried
            log.info("reading %s %r verbatim: %s", proto.op_type, proto.name, error)  # (the checker names it)
            translated = None
    if translated is None:
        name = f"{proto.domain}.{proto.op_type}" if proto.domain not in ("", "ai.onnx") else proto.op_type
        op, attrs = opaque_name("onnx", name), {}
    else:
        op, attrs = translated
    input_names, output_names, captured = names
    node_name = proto.name
    inputs = [scope[name] if name else None for name in input_names]
    if captured:
        inputs += [scope[name] for name in captured]
    outputs = []
    for name in output_names:
        # Omitted optional outputs have no name; they still hold their position.
        out_name = name or graph.fresh_name(f"{node_name or proto.op_type}_unused")
        dtype, shape = types.get(name, (None, None))
        outputs.append((out_name, dtype, shape))
    node = graph.add_node(op, inputs, attrs, outputs=outputs, name=node_name or _default_name(proto))
    node.source = proto
    node.meta["explicit_inputs"] = len(input_names)
    omitted = [] if all(output_names) else [i for i, name in enumerate(output_names) if not name]
    node.meta["omitted_outputs"] = omitted
    for value in node.outputs:
        scope[value.name] = value
    # (a value computed from one whose declared shape was wrong inherited it through shape inference)
    corrected = any(v is not None and v.meta.get("declared_shape_wrong") for v in inputs)
    _fill_types(node, corrected or not declared.isdisjoint(output_names))


def _constants_in(scope: dict[str, Value]):
    """The lookup ``translate`` reads constant inputs with: the tensor of a value name, if constant."""

    def const(name: str) -> Tensor | None:
        value = scope.get(name)
        if value is None:
            return None
        if value.const is not None:
            return value.const
        if value.producer is not None and value.producer.op == "constant":
            return value.producer.attrs["value"]
        return None

    return const


def _default_name(proto: onnx.NodeProto) -> str:
    return f"{proto.op_type}_{proto.output[0] if proto.output else ''}"


def _fill_types(node, declared: bool) -> None:
    """Where ONNX shape inference gave up, the canonical rules may still know. And where the model
    declares a shape (value_info, graph outputs) that the op does not compute, the op's wins: ONNX
    Runtime computes the op's, and ONNX shape inference keeps a declared shape it disagrees with."""
    if ":" in node.op:
        return
    if not declared and all(v.dtype is not None and v.shape is not None for v in node.outputs):
        return
    from ..ir import infer_outputs

    try:
        inferred = infer_outputs(node)
    except (GraphError, KeyError, TypeError, ValueError, IndexError):
        return
    for value, (dtype, shape) in zip(node.outputs, inferred, strict=False):
        value.dtype = value.dtype or dtype
        if value.shape is None:
            value.shape = shape
        elif _contradicts(shape, value.shape):
            log.info("%r is declared %s but %s gives %s", value.name, value.shape, node.op, shape)
            value.shape = tuple(shape)
            value.meta["declared_shape_wrong"] = True


def _contradicts(inferred, declared) -> bool:
    """Whether the op's shape and the declared one differ in rank or in a dim both know (a symbolic
    batch beside a damaged width of 10^9 is still a contradiction)."""
    if inferred is None or declared is None:
        return False
    if len(inferred) != len(declared):
        return all(isinstance(d, int) for d in inferred)
    return any(
        isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(inferred, declared, strict=True)
    )


def _validate(
    model: onnx.ModelProto, where: str, path: Path | None, external_constants: bool, edited: bool = False
) -> None:
    # (the checker finds external data, of initializers and Constant nodes alike, only from the path;
    # a model edited for the checker (``edited``) is checked as it is in memory)
    initializers = model.graph.initializer
    external = external_constants or any(t.data_location == onnx.TensorProto.EXTERNAL for t in initializers)
    try:
        onnx.checker.check_model(str(path) if external and path is not None and not edited else model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as error:
        # (ValueError: the checker's report holds bytes that are not text, from damaged names)
        lines = str(error).strip().splitlines()
        raise BadInput(
            f"{where} is not a valid ONNX graph: {lines[0] if lines else type(error).__name__}"
        ) from None


def _value_type(type_proto: onnx.TypeProto) -> tuple[DType | None, Shape | None]:
    tensor = type_proto.tensor_type
    dtype = DType.from_onnx(tensor.elem_type)
    if not tensor.HasField("shape"):
        return dtype, None
    dims = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
        elif dim.HasField("dim_param") and not dim.dim_param.startswith("unk__"):
            dims.append(dim.dim_param)  # ("unk__N" is ONNX shape inference's name for "unknown")
        else:
            dims.append(None)
    return dtype, tuple(dims)


def _infer_types(model: onnx.ModelProto) -> tuple[dict[str, tuple[DType | None, Shape | None]], str | None]:
    """Types of every value ONNX shape inference can reach, without copying large weights; and why
    inference failed, if it did."""
    if sum(len(t.raw_data) for t in model.graph.initializer) <= PROBE_COPY_LIMIT:
        return _types_of(model)
    probe = onnx.ModelProto()
    probe.ir_version = model.ir_version
    probe.opset_import.extend(model.opset_import)
    probe.functions.extend(model.functions)
    source, graph = model.graph, probe.graph
    graph.node.extend(source.node)
    graph.input.extend(source.input)
    graph.output.extend(source.output)
    graph.value_info.extend(source.value_info)
    declared = {i.name for i in source.input}
    for tensor in source.initializer:
        if _is_small(tensor):
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
    return _types_of(probe)


def _types_of(model: onnx.ModelProto) -> tuple[dict[str, tuple[DType | None, Shape | None]], str | None]:
    """Types by value name, and why shape inference failed, if it did."""
    try:
        inferred, problem = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True), None
    except Exception as error:  # inference is a help, not a requirement
        inferred, problem = model, str(error).strip()
    types = {}
    # Most values share a few types: each distinct one is read once (None: not a tensor type).
    by_type: dict[bytes, tuple[DType | None, Shape | None] | None] = {}
    graph = inferred.graph
    for info in (*graph.input, *graph.value_info, *graph.output):
        type_proto = info.type
        key = type_proto.SerializeToString()
        if key not in by_type:
            by_type[key] = _value_type(type_proto) if type_proto.HasField("tensor_type") else None
        found = by_type[key]
        if found is not None:
            types[info.name] = found
    return types, problem


def _is_small(tensor: onnx.TensorProto) -> bool:
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return int(np.prod(tensor.dims, dtype=np.int64)) <= 64
