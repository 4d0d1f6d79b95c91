"""GroupNormAct in plain PyTorch: the CPU implementation (shared pieces in graphopt/fused/torch_math.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphopt.fused.spec import Activation
from graphopt.fused.torch_math import activate, as_dtype, compute_dtype


def group_norm_act(x: Tensor, weight, bias, groups: int, activation: Activation, eps: float) -> Tensor:
    """act(group_norm(x) * weight + bias) in x's dtype: the native ``group_norm`` and activation the
    fusion replaced, run in float32 (float64 for float64) and rounded once."""
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    cd = compute_dtype(x.dtype)
    z = F.group_norm(x.to(cd), groups, as_dtype(weight, cd), as_dtype(bias, cd), eps)
    return activate(activation, z).to(x.dtype).contiguous()
