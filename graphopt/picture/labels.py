"""What a drawn node says: a readable op name, and one line of the attributes and shape that matter."""

from __future__ import annotations

from ..fused.registry import FUSED_OPS, by_ir_op
from ..ir import Node, Op

# Canonical names that title-casing would spell badly.
_SPELLINGS = {
    Op.MATMUL: "MatMul",
    Op.RMS_NORM: "RMSNorm",
    Op.SILU: "SiLU",
    Op.GELU: "GELU",
    Op.RELU: "ReLU",
    **{op.ir_op: op.name for op in FUSED_OPS},
}
FUSED_IR_OPS = frozenset(op.ir_op for op in FUSED_OPS)


def op_title(op: str) -> str:
    """``layer_norm`` → LayerNorm, ``onnx:Conv`` → Conv, ``aten:convolution.default`` → aten.convolution."""
    if op in _SPELLINGS:
        return _SPELLINGS[op]
    frontend, colon, name = op.partition(":")
    if colon:
        name = name.removesuffix(".default")
        return f"aten.{name}" if frontend == "aten" else name
    return "".join(part.capitalize() for part in op.split("_"))


def node_detail(node: Node) -> str:
    """Attributes that tell fused ops apart (norm, activation, residual), and the output shape."""
    parts = []
    attrs = node.attrs
    fused = by_ir_op(node.op)
    if fused is not None:
        present = [node.input(i) is not None for i in range(len(fused.inputs))]
        parts += fused.describe({k: _text(v) for k, v in attrs.items()}, present)
    elif node.op == Op.GELU and attrs.get("approximate") == "tanh":
        parts.append("tanh approx.")
    shape = node.outputs[0].shape if node.outputs else None
    if shape is not None:
        parts.append("×".join("?" if d is None else str(d) for d in shape) or "scalar")
    return " · ".join(p for p in parts if p)


def signature(node: Node) -> str:
    """The node's title and attributes without its shape: equal for the same fusion in another layer."""
    detail = node_detail(node)
    if node.outputs and node.outputs[0].shape is not None:
        detail = detail.rpartition(" · ")[0] if " · " in detail else ""
    return f"{op_title(node.op)}[{detail}]"


def _text(value) -> str:
    """Attribute strings read from ONNX files are bytes."""
    return value.decode() if isinstance(value, bytes) else str(value)
