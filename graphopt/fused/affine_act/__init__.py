"""The AffineAct fused op: Y = act(X * Scale + Bias), Scale and Bias along one channel axis (spec,
ONNX decomposition, torch implementation, Triton and C++ kernels). It serves a linear layer's bias and
activation (axis -1) and an inference batch norm with nothing to fold into, and its activation (axis 1).
"""

from graphopt.fused.affine_act.spec import AFFINE_ACT

__all__ = ["AFFINE_ACT"]
