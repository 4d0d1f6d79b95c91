"""GroupNormAct's torch ops: ``group_norm_act`` and ``add_group_norm_act`` (with a residual, returning
the sum too).

On CUDA the body launches the Triton kernels (``triton_kernel.launch_group_norm_act``: one kernel, or
two sharing a scratch buffer of partial statistics); elsewhere it runs the plain-torch math
(``torch_math``). ``wrap`` is ``torch.library.wrap_triton`` when traced.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.group_norm_act import torch_math
from graphopt.fused.torch_args import parse_activation
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_math import residual_sum
from graphopt.fused.torch_triton import launcher, no_wrap, scratch

_KERNEL = f"{__package__}.triton_kernel"


def _contiguous(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


def launch(x, weight, bias, residual, groups, activation, eps, wrap=no_wrap):
    """(y, x + residual or None) on CUDA."""
    x, residual = _contiguous(x), _contiguous(residual)
    y = torch.empty_like(x)
    total = None if residual is None else torch.empty_like(x)
    if x.numel():
        launcher(_KERNEL, "launch_group_norm_act")(
            x, _contiguous(weight), _contiguous(bias), residual, y, total,
            groups=groups, activation=int(activation), eps=eps, wrap=wrap,
            scratch=lambda numel: scratch(wrap, numel, torch.float32, x.device),
        )  # fmt: skip
    return y, total


def _check(x: Tensor, groups: int, activation: str) -> None:
    """Raises on what the real implementation would reject, so tracing fails where eager would."""
    parse_activation(activation)
    torch._check(x.dim() >= 2, lambda: f"x must be [N, C, *], got rank {x.dim()}")
    torch._check(groups > 0, lambda: f"groups must be positive, got {groups}")
    torch._check(x.shape[1] % groups == 0, lambda: f"{x.shape[1]} channels do not split into {groups} groups")


def _group_norm_act(x, weight, bias, groups, activation, eps, wrap):
    if x.is_cuda:
        _check(x, groups, activation)
        return launch(x, weight, bias, None, groups, parse_activation(activation), eps, wrap)[0]
    return _group_norm_act_math(x, weight, bias, groups, activation, eps)


def _group_norm_act_math(x, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    return torch_math.group_norm_act(x, weight, bias, groups, parse_activation(activation), eps)


def _group_norm_act_fake(x, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _add_group_norm_act(x, residual, weight, bias, groups, activation, eps, wrap):
    if x.is_cuda:
        _check(x, groups, activation)
        return launch(x, weight, bias, residual, groups, parse_activation(activation), eps, wrap)
    return _add_group_norm_act_math(x, residual, weight, bias, groups, activation, eps)


def _add_group_norm_act_math(x, residual, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    s = residual_sum(x, residual).contiguous()
    return torch_math.group_norm_act(s, weight, bias, groups, parse_activation(activation), eps), s


def _add_group_norm_act_fake(x, residual, weight, bias, groups, activation, eps):
    _check(x, groups, activation)
    torch._check(residual.shape == x.shape, lambda: "residual must have the shape of x")
    empty = torch.empty_like(x, memory_format=torch.contiguous_format)
    return empty, torch.empty_like(empty)


IMPLS = {
    "group_norm_act": TorchImpl(_group_norm_act, _group_norm_act_fake, math=_group_norm_act_math),
    "add_group_norm_act": TorchImpl(
        _add_group_norm_act, _add_group_norm_act_fake, math=_add_group_norm_act_math
    ),
}
