"""Which ONNX ops map to which canonical ops, with their attributes in canonical spelling.

Inputs stay as ONNX has them (``Reshape(x, shape)``); when a shape-like input is a constant its value is
also put into the attributes, so passes can read it and ``fold_shape_inputs`` can drop the input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..fused.registry import FUSED_OPS, by_name
from ..fused.spec import DOMAIN
from ..ir import DType, Op, Tensor

ConstLookup = Callable[[str], Tensor | None]

_UNARY = {
    "Identity": Op.IDENTITY,
    "Relu": Op.RELU,
    "Tanh": Op.TANH,
    "Sigmoid": Op.SIGMOID,
    "Erf": Op.ERF,
    "Sqrt": Op.SQRT,
    "Reciprocal": Op.RECIPROCAL,
    "Exp": Op.EXP,
    "Neg": Op.NEG,
}
_BINARY = {"Add": Op.ADD, "Sub": Op.SUB, "Mul": Op.MUL, "Div": Op.DIV, "Pow": Op.POW, "MatMul": Op.MATMUL}
_POINTWISE = {**_UNARY, **_BINARY}  # (ops without attributes, translated by name alone)


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """Attribute values by name, with strings as str (ONNX stores them as bytes: Gelu's b"tanh" would
    otherwise never equal "tanh")."""
    return {a.name: _attribute_value(a) for a in node.attribute}


def _attribute_value(attribute: onnx.AttributeProto) -> Any:
    """What ``helper.get_attribute_value`` returns, decoded; the common kinds are read here directly
    (that helper reads the kind field again for every kind it tries)."""
    kind = attribute.type
    if kind in _PLAIN_KINDS and not attribute.ref_attr_name:  # (the helper refuses references)
        if kind == onnx.AttributeProto.INT:
            return attribute.i
        if kind == onnx.AttributeProto.FLOAT:
            return attribute.f
        return list(attribute.ints)
    return _decoded(helper.get_attribute_value(attribute))


_PLAIN_KINDS = frozenset({onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.INTS})


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


def translate(node: onnx.NodeProto, opset: int, const: ConstLookup) -> tuple[str, dict[str, Any]] | None:
    """The canonical (op, attrs) of an ONNX node, or None to carry it through verbatim."""
    # (Each read of a NodeProto field builds a new Python object: each is read once.)
    domain, op_type = node.domain, node.op_type
    if domain == "ai.onnx":
        domain = ""
    if "" in node.input and _omits_required_input(node, opset, domain):
        return None  # (a damaged node: carried as it is, for the checker or the runtime to name)
    if domain == "":
        pointwise = _POINTWISE.get(op_type)
        if pointwise is not None:
            return None if node.attribute else (pointwise, {})
        handler = _DEFAULT_DOMAIN.get(op_type)
    elif domain == "com.microsoft" and op_type == "SimplifiedLayerNormalization":
        handler = _rms_norm
    elif domain == DOMAIN:
        handler = _fused if op_type in FUSED_OP_NAMES else None
    else:
        handler = None
    if handler is None:
        return None
    return handler(node, attributes(node), opset, const)


def _omits_required_input(node: onnx.NodeProto, opset: int, domain: str) -> bool:
    """Whether an input the op's schema does not mark optional is left out (named "")."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except onnx.defs.SchemaError:
        return False
    formal = schema.inputs
    for index, name in enumerate(node.input):
        if name:
            continue
        parameter = formal[min(index, len(formal) - 1)] if formal else None
        if parameter is None or parameter.option != onnx.defs.OpSchema.FormalParameterOption.Optional:
            return True
    return False


def _ints(tensor: Tensor | None) -> tuple[int, ...] | None:
    return None if tensor is None else tensor.ints()


def _input_name(node: onnx.NodeProto, i: int) -> str:
    return node.input[i] if i < len(node.input) else ""


def _const_ints(node: onnx.NodeProto, i: int, const: ConstLookup) -> tuple[int, ...] | None:
    name = _input_name(node, i)
    return _ints(const(name)) if name else None


def _reshape(node, attrs, opset, const):
    shape = _const_ints(node, 1, const)
    if attrs.get("allowzero", 0) and (shape is None or 0 in shape):
        return None  # a literal 0 dim: not the canonical "copy this dim" meaning
    return Op.RESHAPE, ({} if shape is None else {"shape": shape})


def _transpose(node, attrs, opset, const):
    return Op.TRANSPOSE, ({"perm": tuple(attrs["perm"])} if "perm" in attrs else {})


def _axes_op(op):
    def handler(node, attrs, opset, const):
        axes = tuple(attrs["axes"]) if "axes" in attrs else _const_ints(node, 1, const)
        if axes is None and len(node.input) > 1 and node.input[1]:
            return op, {}
        return op, ({} if axes is None else {"axes": axes})

    return handler


def _split(node, attrs, opset, const):
    sizes = tuple(attrs["split"]) if "split" in attrs else _const_ints(node, 1, const)
    canonical = {"axis": attrs.get("axis", 0)}
    if sizes is not None:
        canonical["sizes"] = sizes
    elif "num_outputs" in attrs:
        canonical["num_outputs"] = attrs["num_outputs"]
    return Op.SPLIT, canonical


def _slice(node, attrs, opset, const):
    if opset < 10:
        starts, ends = attrs.get("starts"), attrs.get("ends")
        axes = attrs.get("axes", list(range(len(starts or ()))))
        steps = [1] * len(axes)
    else:
        starts, ends = _const_ints(node, 1, const), _const_ints(node, 2, const)
        axes = _const_ints(node, 3, const) if _input_name(node, 3) else tuple(range(len(starts or ())))
        steps = _const_ints(node, 4, const) if _input_name(node, 4) else (1,) * len(axes or ())
    if None in (starts, ends, axes, steps):
        return Op.SLICE, {}
    return Op.SLICE, {
        "axes": tuple(axes),
        "starts": tuple(starts),
        "ends": tuple(ends),
        "steps": tuple(steps),
    }


def _shape(node, attrs, opset, const):
    return Op.SHAPE, {"start": attrs.get("start", 0), "end": attrs.get("end")}


def _gather(node, attrs, opset, const):
    return Op.GATHER, {"axis": attrs.get("axis", 0)}


def _concat(node, attrs, opset, const):
    return Op.CONCAT, {"axis": attrs["axis"]}


def _cast(node, attrs, opset, const):
    to = DType.from_onnx(attrs["to"])
    return None if to is None or len(attrs) > 1 else (Op.CAST, {"to": to})


def _constant(node, attrs, opset, const):
    if "value" in attrs:
        array = numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs or "value_floats" in attrs:
        array = np.asarray(attrs.get("value_float", attrs.get("value_floats")), dtype=np.float32)
    elif "value_int" in attrs or "value_ints" in attrs:
        array = np.asarray(attrs.get("value_int", attrs.get("value_ints")), dtype=np.int64)
    else:
        return None  # sparse and string constants stay verbatim
    return Op.CONSTANT, {"value": Tensor.from_array(array)}


def _only_first_output(node: onnx.NodeProto) -> bool:
    return all(not name for name in node.output[1:])


def _layer_norm(node, attrs, opset, const):
    if not _only_first_output(node) or attrs.get("stash_type", 1) != 1:
        return None
    return Op.LAYER_NORM, {"axis": attrs.get("axis", -1), "eps": float(attrs.get("epsilon", 1e-5))}


def _rms_norm(node, attrs, opset, const):
    if not _only_first_output(node) or attrs.get("stash_type", 1) != 1:
        return None
    return Op.RMS_NORM, {"axis": attrs.get("axis", -1), "eps": float(attrs.get("epsilon", 1e-5))}


def _gelu(node, attrs, opset, const):
    return Op.GELU, {"approximate": attrs.get("approximate", "none")}


def _reduce_mean(node, attrs, opset, const):
    axes = tuple(attrs["axes"]) if "axes" in attrs else _const_ints(node, 1, const)
    if attrs.get("noop_with_empty_axes", 0) or (axes is None and _input_name(node, 1)):
        return None
    if attrs.get("keepdims", 1) not in (0, 1):
        return None  # (ONNX Runtime keeps dims only for 1; other values have no meaning to rely on)
    canonical = {"keepdims": bool(attrs.get("keepdims", 1))}
    if axes is not None:
        canonical["axes"] = axes
    return Op.REDUCE_MEAN, canonical


def _gemm(node, attrs, opset, const):
    plain = attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0 and not attrs.get("transA", 0)
    return (Op.LINEAR, {}) if plain and attrs.get("transB", 0) == 1 else None


FUSED_OP_NAMES = frozenset(op.name for op in FUSED_OPS)


def _fused(node, attrs, opset, const):
    """A node of graphopt's own domain (an already optimized model): its fused op, attributes read
    by the op's spec, absent ones at their defaults."""
    op = by_name(node.op_type)
    return op.ir_op, {a.ir_name: a.value_type(attrs.get(a.name, a.default)) for a in op.attributes}


_DEFAULT_DOMAIN = {
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Squeeze": _axes_op(Op.SQUEEZE),
    "Unsqueeze": _axes_op(Op.UNSQUEEZE),
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Shape": _shape,
    "Concat": _concat,
    "Cast": _cast,
    "Constant": _constant,
    "LayerNormalization": _layer_norm,
    "RMSNormalization": _rms_norm,
    "Gelu": _gelu,
    "ReduceMean": _reduce_mean,
    "Gemm": _gemm,
}
