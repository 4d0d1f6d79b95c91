"""Output types of one ONNX node the IR carries verbatim, from ONNX's own shape inference for its op.

Shape inference of the whole model at load time cannot see through shapes computed at run time
(``Expand(cls_token, Where(Equal(...)))`` in the TorchScript exporter's ViT-like embeddings); once
constant folding has made such an input a constant, the node's op knows its output shape, and the
dims after it (the residual stream's sequence length) become static for the rules that need them.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir import DType, Node, Shape, constant_of

# Constant inputs larger than this are shapes' data only rarely: they are passed as types alone.
_DATA_LIMIT = 1 << 12


def infer_onnx_node(node: Node) -> list[tuple[DType | None, Shape | None]] | None:
    """Each output's (dtype, shape) as ONNX infers them for ``node``'s op and inputs, or None."""
    proto: onnx.NodeProto | None = node.source
    if proto is None or proto.domain not in ("", "ai.onnx") or len(proto.input) != len(node.inputs):
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in proto.attribute):
        return None
    opset = node.graph.meta.get("opset", {}).get("", None) if node.graph is not None else None
    try:
        schema = onnx.defs.get_schema(proto.op_type, opset or onnx.defs.onnx_opset_version(), "")
    except onnx.defs.SchemaError:
        return None
    types, data = {}, {}
    for name, value in zip(proto.input, node.inputs, strict=True):
        if value is None or not name:
            continue
        if value.dtype is None:
            return None
        dims = None if value.shape is None else [d if isinstance(d, int) else None for d in value.shape]
        types[name] = helper.make_tensor_type_proto(value.dtype.onnx, dims)
        tensor = constant_of(value)
        if tensor is not None and tensor.nbytes <= _DATA_LIMIT:
            data[name] = numpy_helper.from_array(np.asarray(tensor.numpy()), name)
    imports = [helper.make_opsetid("", opset)] if opset else None
    try:
        inferred = onnx.shape_inference.infer_node_outputs(schema, proto, types, data, opset_imports=imports)
    except Exception:  # (inference that fails on these inputs tells nothing)
        return None
    return [_type(inferred.get(name)) for name in proto.output]


def _type(type_proto: onnx.TypeProto | None) -> tuple[DType | None, Shape | None]:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None, None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return DType.from_onnx(tensor.elem_type), None
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    return DType.from_onnx(tensor.elem_type), dims
