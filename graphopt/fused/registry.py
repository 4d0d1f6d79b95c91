"""The fused ops graphopt emits, in registration order (ONNX schemas, fallback functions)."""

from __future__ import annotations

from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.table import NORM_ACT, NORM_ACT_LINEAR, FusedOp

FUSED_OPS: tuple[FusedOp, ...] = (NORM_ACT, NORM_ACT_LINEAR, AFFINE_ACT)


def by_name(name: str) -> FusedOp:
    for op in FUSED_OPS:
        if op.name == name:
            return op
    raise KeyError(name)
