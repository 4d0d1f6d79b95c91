"""ONNX schemas of the fused ops, derived from the table and registered with ``onnx.defs``.

Registration makes ``onnx.checker`` and ``onnx.shape_inference`` understand nodes of the ``graphopt``
domain: they check arity, attribute types and element types, and infer output types and shapes.
"""

from __future__ import annotations

import logging
import threading

import onnx
from onnx import defs, helper

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.table import DOMAIN, DOMAIN_VERSION, FUSED_OPS, NORM_ACT, NORM_ACT_LINEAR, FusedOp

log = logging.getLogger(__name__)

TYPE_PARAM = "T"
# ONNX spellings of the element types the fused ops accept (the table's dtypes, in its order).
_ONNX_TYPE = {"float32": "tensor(float)", "float16": "tensor(float16)", "bfloat16": "tensor(bfloat16)"}

_lock = threading.Lock()
_registered = False


def build_schema(op: FusedOp) -> defs.OpSchema:
    """The ``OpSchema`` of one fused op (not registered)."""
    schema_cls = defs.OpSchema
    optional = schema_cls.FormalParameterOption.Optional
    single = schema_cls.FormalParameterOption.Single

    def param(port):
        return schema_cls.FormalParameter(
            port.name, TYPE_PARAM, port.doc, param_option=optional if port.optional else single
        )

    attributes = [
        schema_cls.Attribute(a.name, helper.make_attribute(a.name, a.kind(a.default)), a.doc)
        for a in op.attributes
    ]
    schema = schema_cls(
        op.name,
        DOMAIN,
        DOMAIN_VERSION,
        op.doc,
        inputs=[param(p) for p in op.inputs],
        outputs=[param(p) for p in op.outputs],
        type_constraints=[(TYPE_PARAM, [_ONNX_TYPE[d] for d in op.dtypes], "float32, float16 or bfloat16")],
        attributes=attributes,
    )
    inference = _INFERENCE.get(op.name)
    # Python-defined inference functions arrived in onnx 1.16; without one, outputs stay untyped.
    if inference is not None and hasattr(schema, "set_type_and_shape_inference_function"):
        schema.set_type_and_shape_inference_function(inference)
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


def _infer_norm_act(ctx) -> None:
    """Y and ResidualSum have X's type and shape."""
    x_type = ctx.get_input_type(0)
    if x_type is None:
        return
    for i in range(ctx.get_num_outputs()):
        if ctx.has_output(i):
            ctx.set_output_type(i, x_type)


def _infer_norm_act_linear(ctx) -> None:
    """Y is X.shape[:-1] + [Weight.shape[0]], of X's element type."""
    x_type = ctx.get_input_type(0)
    if x_type is None:
        return
    out = onnx.TypeProto()
    out.tensor_type.elem_type = x_type.tensor_type.elem_type
    weight_index = [p.name for p in NORM_ACT_LINEAR.inputs].index("Weight")
    weight_type = ctx.get_input_type(weight_index) if ctx.has_input(weight_index) else None
    x_shape = x_type.tensor_type
    if x_shape.HasField("shape") and x_shape.shape.dim:
        dims = out.tensor_type.shape.dim
        for dim in x_shape.shape.dim[:-1]:
            dims.add().CopyFrom(dim)
        k = dims.add()
        if weight_type is not None and len(weight_type.tensor_type.shape.dim) == 2:
            k.CopyFrom(weight_type.tensor_type.shape.dim[0])
    ctx.set_output_type(0, out)


_INFERENCE = {
    NORM_ACT.name: _infer_norm_act,
    NORM_ACT_LINEAR.name: _infer_norm_act_linear,
    GROUP_NORM_ACT.name: _infer_norm_act,  # (Y and ResidualSum have X's type and shape there too)
}
