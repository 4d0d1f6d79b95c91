"""GroupNormAct in plain PyTorch: the CPU implementation (shared pieces in graphopt/fused/torch_math.py)."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.spec import Activation
from graphopt.fused.torch_math import activate, compute_dtype


def group_norm_act(x: Tensor, weight, bias, groups: int, activation: Activation, eps: float) -> Tensor:
    """act(group_norm(x) * weight + bias) in x's dtype, statistics in float32 (float64 for float64).

    Not F.group_norm: its statistics lose the low bits of groups with a large common offset. Each
    (sample, group) is shifted by its first element first, as the kernels do.
    """
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    cd = compute_dtype(x.dtype)
    s = x.to(cd)
    n, channels = s.shape[:2]
    grouped = s.reshape(n, groups, -1)
    shifted = grouped - grouped[:, :, :1]
    var, mean = torch.var_mean(shifted, 2, correction=0, keepdim=True)
    z = ((shifted - mean) * torch.rsqrt(var + eps)).reshape(s.shape)
    per_channel = (channels,) + (1,) * (s.dim() - 2)
    if weight is not None:
        z = z * weight.to(cd).reshape(per_channel)
    if bias is not None:
        z = z + bias.to(cd).reshape(per_channel)
    return activate(activation, z).to(x.dtype).contiguous()
