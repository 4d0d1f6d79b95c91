"""The fused ops graphopt emits, in registration order: one line per op folder.

Order is ABI where it shows (the C++ kernel table's op codes): append, never reorder.
"""

from __future__ import annotations

from graphopt.fused.affine_act import AFFINE_ACT
from graphopt.fused.embedding_lookups import EMBEDDING_LOOKUPS
from graphopt.fused.group_norm_act import GROUP_NORM_ACT
from graphopt.fused.norm_act import NORM_ACT
from graphopt.fused.norm_act_linear import NORM_ACT_LINEAR
from graphopt.fused.spec import FusedOp

FUSED_OPS: tuple[FusedOp, ...] = (NORM_ACT, NORM_ACT_LINEAR, AFFINE_ACT, GROUP_NORM_ACT, EMBEDDING_LOOKUPS)

_BY_NAME = {op.name: op for op in FUSED_OPS}
_BY_IR_OP = {op.ir_op: op for op in FUSED_OPS}
_BY_FORM = {form.name: (op, form) for op in FUSED_OPS for form in op.torch_forms}


def by_name(name: str) -> FusedOp:
    """The op of ONNX op_type ``name`` (domain graphopt); KeyError if there is none."""
    return _BY_NAME[name]


def by_ir_op(ir_op: str) -> FusedOp | None:
    """The op behind an IR op name, or None when ``ir_op`` is not a fused op."""
    return _BY_IR_OP.get(ir_op)


def by_torch_name(name: str):
    """(op, form) of the torch op ``torch.ops.graphopt.<name>``; KeyError if there is none."""
    return _BY_FORM[name]
