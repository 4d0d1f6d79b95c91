"""graphopt's own fused ops (``torch.ops.graphopt.*``) back to their IR ops, so a program that
graphopt already optimized reads as the same IR that produced it. Each op's spec says which torch
arguments are which ports and attributes (``FusedOp.torch_forms``)."""

from __future__ import annotations

from ..fused.registry import by_torch_name
from .aten_members import Member


def translate_fused(name: str, a: dict) -> list[Member] | None:
    """The member a call of ``torch.ops.graphopt.<name>`` becomes (arguments ``a`` bound by name)."""
    try:
        op, form = by_torch_name(name)
    except KeyError:
        return None
    inputs = [a.get(p.torch_name) if p.name in form.inputs else None for p in op.inputs]
    while inputs and inputs[-1] is None:
        inputs.pop()  # absent trailing ports are left out, as every frontend leaves them
    attrs = {attr.ir_name: a[attr.ir_name] for attr in op.attributes}
    # One result per form output, in the op's port order (a tuple's elements by index).
    ports = [p.name for p in op.outputs if p.name in form.outputs]
    results = [form.outputs.index(p) for p in ports] if len(form.outputs) > 1 else [None]
    return [Member(op.ir_op, inputs, attrs, results=results)]
