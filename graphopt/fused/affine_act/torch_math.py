"""AffineAct's math in plain PyTorch (the CPU implementation): float32 arithmetic (float64 for float64
inputs), the result in x's dtype."""

from __future__ import annotations

import torch

from graphopt.fused.spec import Activation
from graphopt.fused.torch_math import activate, compute_dtype


def affine_act(x, scale, bias, activation: Activation, dim: int) -> torch.Tensor:
    """act(x * scale + bias), scale and bias of [x.shape[dim]]."""
    cd = compute_dtype(x.dtype)
    shape = [1] * x.dim()
    shape[dim] = -1
    z = x.to(cd)
    if scale is not None:
        z = z * scale.to(cd).view(shape)
    if bias is not None:
        z = z + bias.to(cd).view(shape)
    return activate(activation, z).to(x.dtype).contiguous()
