"""GroupNormAct as PyTorch ops: ``torch.ops.graphopt.group_norm_act`` and ``add_group_norm_act``.

CPU (and any device but CUDA): the plain-torch math below. CUDA: the Triton kernel of
``triton_kernel``, imported on the first CUDA tensor. Registered as ``torch_ops`` registers NormAct
(a ``triton_op`` with a fake implementation, and direct eager kernels).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from graphopt.dependencies import require
from graphopt.fused import torch_ops
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.table import Activation
from graphopt.fused.torch_math import activate, compute_dtype, residual_sum

# --- plain-torch math -----------------------------------------------------------------------------


def group_norm_act(x: Tensor, weight, bias, groups: int, activation: Activation, eps: float) -> Tensor:
    """act(group_norm(x) * weight + bias) in x's dtype, statistics in float32 (float64 for float64).

    Not F.group_norm: its statistics lose the low bits of groups with a large common offset. Each
    (sample, group) is shifted by its first element first, as the kernels do (see torch_math.py).
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


# --- CUDA: the Triton kernel ------------------------------------------------------------------------


@functools.cache
def _launcher():
    require("triton", "running graphopt's fused ops on CUDA tensors")
    from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act

    return launch_group_norm_act


def _contiguous(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


def _triton(x, weight, bias, residual, groups, activation, eps, wrap):
    """(y, x + residual or None) on CUDA."""
    x, residual = _contiguous(x), _contiguous(residual)
    y = torch.empty_like(x)
    total = None if residual is None else torch.empty_like(x)
    if x.numel():
        _launcher()(
            x, _contiguous(weight), _contiguous(bias), residual, y, total,
            groups=groups, activation=int(activation), eps=eps, wrap=wrap,
        )  # fmt: skip
    return y, total


# --- the ops ----------------------------------------------------------------------------------------


def _check(x: Tensor, groups: int, activation: str) -> None:
    """Raises on what the real implementation would reject, so tracing fails where eager would."""
    torch_ops.parse_activation(activation)
    torch._check(x.dim() >= 2, lambda: f"x must be [N, C, *], got rank {x.dim()}")
    torch._check(groups > 0, lambda: f"groups must be positive, got {groups}")
    torch._check(x.shape[1] % groups == 0, lambda: f"{x.shape[1]} channels do not split into {groups} groups")


def _group_norm_act(x, weight, bias, groups, activation, eps, wrap):
    _check(x, groups, activation)
    a = torch_ops.parse_activation(activation)
    if x.is_cuda:
        return _triton(x, weight, bias, None, groups, a, eps, wrap)[0]
    return group_norm_act(x, weight, bias, groups, a, eps)


@torch_ops.define_op(GROUP_NORM_ACT.torch_name)
def group_norm_act_op(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, groups: int, activation: str, eps: float
) -> Tensor:
    """activation(group_norm(x, groups) * weight + bias), weight and bias per channel."""
    return _group_norm_act(x, weight, bias, groups, activation, eps, torch.library.wrap_triton)


torch_ops.register_eager(GROUP_NORM_ACT.torch_name, _group_norm_act)


@group_norm_act_op.register_fake
def _(x, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _add_group_norm_act(x, residual, weight, bias, groups, activation, eps, wrap):
    _check(x, groups, activation)
    a = torch_ops.parse_activation(activation)
    if x.is_cuda:
        return _triton(x, weight, bias, residual, groups, a, eps, wrap)
    s = residual_sum(x, residual).contiguous()
    return group_norm_act(s, weight, bias, groups, a, eps), s


@torch_ops.define_op(f"add_{GROUP_NORM_ACT.torch_name}")
def add_group_norm_act_op(
    x: Tensor, residual: Tensor, weight: Tensor | None, bias: Tensor | None, groups: int, activation: str,
    eps: float,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(activation(group_norm(x + residual) * weight + bias), x + residual)."""
    return _add_group_norm_act(x, residual, weight, bias, groups, activation, eps, torch.library.wrap_triton)


torch_ops.register_eager(f"add_{GROUP_NORM_ACT.torch_name}", _add_group_norm_act)


@add_group_norm_act_op.register_fake
def _(x, residual, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    torch._check(residual.shape == x.shape, lambda: "residual must have the shape of x")
    empty = torch.empty_like(x, memory_format=torch.contiguous_format)
    return empty, torch.empty_like(empty)
