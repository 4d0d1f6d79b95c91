"""ONNX schemas of the fused ops, derived from the table and registered with ``onnx.defs``.

Registration makes ``onnx.checker`` and ``onnx.shape_inference`` understand nodes of the ``graphopt``
domain: they check arity, attribute types and element types, and infer output types and shapes.
"""

from __future__ import annotations

import logging
import threading

import onnx
from onnx import defs, helper

from graphopt.fused.registry import FUSED_OPS
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION, INDEX, INT64, STORAGE, FusedOp

log = logging.getLogger(__name__)

TYPE_PARAM = "T"
INDEX_TYPE_PARAM = "Tind"  # (ONNX Gather's name for the same constraint)
# ONNX spellings of the element types the fused ops accept (the table's dtypes, in its order).
_ONNX_TYPE = {"float32": "tensor(float)", "float16": "tensor(float16)", "bfloat16": "tensor(bfloat16)"}
_PORT_TYPE = {STORAGE: TYPE_PARAM, INDEX: INDEX_TYPE_PARAM, INT64: "tensor(int64)"}

_lock = threading.Lock()
_registered = False


def build_schema(op: FusedOp) -> defs.OpSchema:
    """The ``OpSchema`` of one fused op (not registered)."""
    schema_cls = defs.OpSchema
    optional = schema_cls.FormalParameterOption.Optional
    single = schema_cls.FormalParameterOption.Single

    def param(port):
        return schema_cls.FormalParameter(
            port.name, _PORT_TYPE[port.element], port.doc, param_option=optional if port.optional else single
        )

    attributes = [
        schema_cls.Attribute(a.name, helper.make_attribute(a.name, a.value_type(a.default)), a.doc)
        for a in op.attributes
    ]
    constraints = [(TYPE_PARAM, [_ONNX_TYPE[d] for d in op.dtypes], "float32, float16 or bfloat16")]
    if any(p.element == INDEX for p in op.inputs):
        constraints.append((INDEX_TYPE_PARAM, ["tensor(int32)", "tensor(int64)"], "int32 or int64"))
    schema = schema_cls(
        op.name,
        DOMAIN,
        DOMAIN_VERSION,
        op.doc,
        inputs=[param(p) for p in op.inputs],
        outputs=[param(p) for p in op.outputs],
        type_constraints=constraints,
        attributes=attributes,
    )
    # Python-defined inference functions arrived in onnx 1.16; without one, outputs stay untyped.
    if hasattr(schema, "set_type_and_shape_inference_function"):
        schema.set_type_and_shape_inference_function(lambda ctx: _infer(op, ctx))
    return schema


def register_onnx_schemas() -> None:
    """Registers the schema of every fused op with ``onnx.defs``; later calls do nothing."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        for op in FUSED_OPS:
            # Another component (or an earlier interpreter-wide registration) may have done it.
            if not defs.has(op.name, DOMAIN_VERSION, DOMAIN):
                defs.register_schema(build_schema(op))
                log.debug("registered ONNX schema %s::%s v%d", DOMAIN, op.name, DOMAIN_VERSION)
        _registered = True


def _infer(op: FusedOp, ctx) -> None:
    """Outputs of the first input's element type (X's), shaped by the op's shape rule (dims it cannot
    tell stay unknown)."""
    x_type = ctx.get_input_type(0)
    if x_type is None:
        return
    count = min(ctx.get_num_inputs(), len(op.inputs))
    present = [i < count and ctx.has_input(i) for i in range(len(op.inputs))]
    shapes = [_shape_of(ctx.get_input_type(i)) if here else None for i, here in enumerate(present)]
    for i, shape in enumerate(op.shape_rule(present, shapes)):
        if i < ctx.get_num_outputs() and ctx.has_output(i):
            ctx.set_output_type(i, _tensor_type(x_type.tensor_type.elem_type, shape))


def _shape_of(type_proto) -> tuple | None:
    """The dims of a tensor type: ints, symbolic names, None where unknown; None without a shape."""
    if type_proto is None or not type_proto.tensor_type.HasField("shape"):
        return None
    dims = type_proto.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in dims)


def _tensor_type(elem_type: int, shape: tuple | None) -> onnx.TypeProto:
    out = onnx.TypeProto()
    out.tensor_type.elem_type = elem_type
    if shape is not None:
        dims = out.tensor_type.shape.dim
        for d in shape:
            dim = dims.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
    return out
