"""The NormAct fused op (spec, ONNX decomposition, torch implementation, Triton and C++ kernels)."""

from graphopt.fused.norm_act.spec import NORM_ACT

__all__ = ["NORM_ACT"]
