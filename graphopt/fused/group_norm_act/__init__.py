"""The GroupNormAct fused op (spec, ONNX decomposition, torch implementation, Triton and C++ kernels)."""

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT

__all__ = ["GROUP_NORM_ACT"]
