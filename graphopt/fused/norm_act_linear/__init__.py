"""The NormActLinear fused op (spec, ONNX decomposition, torch implementation, Triton and C++ kernels)."""

from graphopt.fused.norm_act_linear.spec import NORM_ACT_LINEAR

__all__ = ["NORM_ACT_LINEAR"]
