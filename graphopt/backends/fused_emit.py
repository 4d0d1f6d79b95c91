"""ONNX form of the fused ops: one node of the graphopt domain each (``onnx_emit``'s table names it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fused.registry import by_ir_op
from ..fused.spec import DOMAIN
from ..ir import Node

if TYPE_CHECKING:
    from .onnx_emit import Emitter


def emit_fused(e: Emitter, node: Node) -> None:
    """A fused op as its node of the graphopt domain, attributes under their ONNX names.

    An axis is written counted from the end where X's rank is known (the same dims; the kernels read
    either): the fallback body then reduces over constant trailing axes, as the exporters write a norm,
    and ONNX Runtime fuses it. Counted from the front, the body must flatten X by its rank at run time
    and reshape back before the scale, which hides the norm from that fusion (an AffineAct's channel
    axis from the front also costs a Shape, Slice, ConstantOfShape and Concat per call).
    """
    op = by_ir_op(node.op)
    attrs = {a.name: a.value_type(node.attrs[a.ir_name]) for a in op.attributes if a.ir_name in node.attrs}
    rank = node.input(0).rank
    if attrs.get("axis", -1) >= 0 and rank is not None:
        attrs["axis"] -= rank
    e.node(op.name, node.inputs, [v.name for v in node.outputs], name=node.name, domain=DOMAIN, **attrs)
