"""Model-local fallback functions for the fused ops, so an optimized model runs in any ONNX runtime.

A runtime with graphopt's kernel library registered runs its kernel; any other runtime inlines the
model-local function of the node: its decomposition into standard ops (``onnx_decompose``). One
op, several attribute combinations: each combination gets its own function, told apart by the
``overload`` field (ONNX IR version 10), which the node names too. Overload names read like the
attributes they stand for: ``layer_gelu_eps1e-05_axis-1_scale_bias``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator

import onnx
from onnx import TensorProto, helper

from graphopt.fused.onnx_decompose import CAST_LIKE_OPSET, Variant, decompose
from graphopt.fused.onnx_schema import register_onnx_schemas
from graphopt.fused.registry import FUSED_OPS
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION

log = logging.getLogger(__name__)

OVERLOAD_IR_VERSION = 10
MAX_FILL_ELEMENTS = 1 << 16  # larger fills of an absent Scale or Bias stay built from X's shape
FUSED_OP_BY_NAME = {op.name: op for op in FUSED_OPS}


def overload_name(variant: Variant) -> str:
    """Each attribute as its spec spells it, then ``_<optional port in use>...[_<type>]``:
    ``layer_gelu_eps1e-05_axis-1_scale_bias``.

    Optional ports are named in the op's order, inputs then outputs: a node that adds a residual
    and returns the sum has ``..._residual_residualsum``.
    """
    op = FUSED_OP_BY_NAME[variant.op_name]
    parts = [op.attribute(name).spell(value) for name, value in variant.attrs]
    parts += [p.name.lower() for p in (*op.inputs, *op.outputs) if p.optional and p.name in variant.present]
    if variant.trailing:
        parts.append("fill" + "x".join(map(str, variant.trailing)))
    if variant.opset < CAST_LIKE_OPSET or variant.trailing:
        parts.append(helper.tensor_dtype_to_np_dtype(variant.elem_type).name)
    return "_".join(parts)


Fill = tuple[int, tuple[int, ...]]  # (element type, shape) of a norm's constant Scale or Bias fill


def variant_of(node: onnx.NodeProto, opset: int, elem_type: int | None = None, fill: Fill | None = None):
    """The variant a graphopt node calls for, reading absent attributes as the spec's defaults;
    ``fill``: ``static_fill``'s finding for the node."""
    op = FUSED_OP_BY_NAME[node.op_type]
    names = {a.name for a in op.attributes}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in names}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    ports = [*zip(op.inputs, node.input, strict=False), *zip(op.outputs, node.output, strict=False)]
    present = frozenset(port.name for port, name in ports if port.optional and name)
    for port in op.outputs:
        if port.needs and port.name in present and port.needs not in present:
            raise ValueError(
                f"node {node.name or node.op_type!r}: {port.name} is asked for without a {port.needs} input"
            )
    if opset < CAST_LIKE_OPSET and elem_type is None:
        raise ValueError(
            f"node {node.name or node.op_type!r}: below opset {CAST_LIKE_OPSET} the fallback function "
            "needs X's element type, which shape inference could not find"
        )
    elem_type = elem_type if opset < CAST_LIKE_OPSET else TensorProto.FLOAT
    trailing = ()
    if fill is not None:
        elem_type, trailing = fill
    return Variant.of(op, present=present, opset=opset, elem_type=elem_type, trailing=trailing, **attrs)


def build_function(variant: Variant) -> onnx.FunctionProto:
    """The FunctionProto of one variant, in domain ``graphopt``, with its overload name."""
    op = FUSED_OP_BY_NAME[variant.op_name]
    nodes, outputs = decompose(variant)
    function = helper.make_function(
        DOMAIN,
        op.name,
        inputs=[p.name for p in op.inputs],
        outputs=outputs,
        nodes=nodes,
        opset_imports=[helper.make_opsetid("", variant.opset)],
        attributes=[a.name for a in op.attributes],
        doc_string=f"Fallback decomposition of {DOMAIN}::{op.name} ({overload_name(variant)}).",
    )
    function.overload = overload_name(variant)
    return function


def attach_functions(model: onnx.ModelProto) -> None:
    """Gives every graphopt node of ``model`` (subgraphs included) its overload and fallback function.

    Adds the missing functions, the ``graphopt`` opset import and raises the IR version to 10 where
    needed. Running it again changes nothing.
    """
    register_onnx_schemas()
    opset = default_opset(model)
    nodes = list(graphopt_nodes(model))
    if not nodes:
        return
    elem_types = input_elem_types(model) if opset < CAST_LIKE_OPSET else {}
    tensors = typed_values(model.graph)
    existing = {(f.domain, f.name, f.overload) for f in model.functions}
    added = 0
    variants: dict[tuple, tuple[Variant, str]] = {}  # (thousands of nodes, a few variants)
    for node in nodes:
        elem_type, fill = elem_types.get(node.input[0]), static_fill(node, tensors)
        key = (*variant_key(node, elem_type), fill)
        if key not in variants:
            variant = variant_of(node, opset, elem_type, fill)
            variants[key] = (variant, overload_name(variant))
        variant, node.overload = variants[key]
        key = (DOMAIN, node.op_type, node.overload)
        if key not in existing:
            model.functions.append(build_function(variant))
            existing.add(key)
            added += 1
    _ensure_opset_import(model.opset_import)
    for function in model.functions:
        if function.domain != DOMAIN and any(n.domain == DOMAIN for n in _walk(function.node)):
            _ensure_opset_import(function.opset_import)
    model.ir_version = max(model.ir_version, OVERLOAD_IR_VERSION)
    log.debug("attached fallback functions: %d graphopt nodes, %d functions added", len(nodes), added)


def variant_key(node: onnx.NodeProto, elem_type: int | None) -> tuple:
    """All that ``variant_of`` reads of a node (and more): nodes with equal keys have one variant."""
    return (
        node.op_type,
        tuple(a.SerializeToString() for a in node.attribute),
        tuple(map(bool, node.input)),
        tuple(map(bool, node.output)),
        elem_type,
    )


def typed_values(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto.Tensor]:
    """The tensor type of each value the graph declares (its inputs, outputs and value_info; graphopt
    writes value_info for every value whose shape it knows)."""
    return {
        info.name: info.type.tensor_type
        for info in (*graph.input, *graph.value_info, *graph.output)
        if info.type.HasField("tensor_type")
    }


def static_fill(node: onnx.NodeProto, tensors: dict) -> Fill | None:
    """(X's element type, X.shape[axis:]) where the node's body fills in an absent Scale or Bias of a
    norm (``Variant.trailing``) and ``tensors`` know that shape statically, up to MAX_FILL_ELEMENTS
    values (one constant per variant); else None."""
    op = FUSED_OP_BY_NAME[node.op_type]
    ports = dict(zip((p.name for p in op.inputs), node.input, strict=False))
    names = {a.name for a in op.attributes}
    if "norm" not in names or not {"Scale", "Bias"} <= set(ports) or (ports["Scale"] and ports["Bias"]):
        return None
    tensor = tensors.get(node.input[0])
    if tensor is None or not tensor.HasField("shape"):
        return None
    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis = given.get("axis", op.attribute("axis").default if "axis" in names else -1)
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    trailing = tuple(dims[axis:]) if -len(dims) <= axis < len(dims) else ()
    if not trailing or 0 in trailing or math.prod(trailing) > MAX_FILL_ELEMENTS:
        return None
    return tensor.elem_type, trailing


_FILL_SUFFIX = re.compile(r"_fill([0-9]+(?:x[0-9]+)*)_([a-z0-9]+)$")
_FILL_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)
_ELEM_TYPE_BY_NAME = {helper.tensor_dtype_to_np_dtype(t).name: t for t in _FILL_TYPES}


def fill_of_overload(overload: str) -> Fill | None:
    """The fill an overload name spells (``..._fill64x3_float16``, ``overload_name``'s suffix), or None.
    Reading a model back, the function a node calls is checked against the one graphopt builds for
    that fill: its values are ones and zeros, the same for any shape they broadcast to."""
    match = _FILL_SUFFIX.search(overload)
    if match is None or match.group(2) not in _ELEM_TYPE_BY_NAME:
        return None
    return _ELEM_TYPE_BY_NAME[match.group(2)], tuple(int(d) for d in match.group(1).split("x"))


def default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    raise ValueError("the model imports no default-domain opset; expected one (13 or newer)")


def _ensure_opset_import(imports) -> None:
    for opset in imports:
        if opset.domain == DOMAIN:
            if opset.version != DOMAIN_VERSION:
                raise ValueError(
                    f"the model imports {DOMAIN} version {opset.version}; expected {DOMAIN_VERSION}"
                )
            return
    imports.append(helper.make_opsetid(DOMAIN, DOMAIN_VERSION))


def _walk(nodes) -> Iterator[onnx.NodeProto]:
    """Every node of a node list, descending into subgraph attributes (If, Loop, Scan)."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            kind = attr.type
            if kind == onnx.AttributeProto.GRAPH:
                yield from _walk(attr.g.node)
            elif kind == onnx.AttributeProto.GRAPHS:
                for graph in attr.graphs:
                    yield from _walk(graph.node)


def graphopt_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    bodies = [model.graph.node] + [f.node for f in model.functions if f.domain != DOMAIN]
    for body in bodies:
        for node in _walk(body):
            if node.domain == DOMAIN and node.op_type in FUSED_OP_BY_NAME:
                yield node


def input_elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every typed value, after shape inference (needed below opset 15 only)."""
    typed = onnx.ModelProto()
    typed.CopyFrom(model)
    _ensure_opset_import(typed.opset_import)
    inferred = onnx.shape_inference.infer_shapes(typed)
    graph = inferred.graph
    types = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    return types
