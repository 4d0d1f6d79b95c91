"""AffineAct's torch op ``affine_act``: the Triton kernel on CUDA (``triton_kernel.launch_affine_act``),
the plain-torch math (``torch_math``) elsewhere. ``wrap`` is ``torch.library.wrap_triton`` when traced."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.affine_act import torch_math
from graphopt.fused.spec import Activation
from graphopt.fused.torch_args import parse_activation
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_triton import flat, launcher, no_wrap

_KERNEL = f"{__package__}.triton_kernel"


def channel_dim(x: Tensor, axis: int) -> int:
    rank = x.dim()
    dim = axis + rank if axis < 0 else axis
    torch._check(0 <= dim < rank, lambda: f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def _check_weight(name: str, weight: Tensor | None, channels) -> None:
    if weight is not None:
        torch._check(
            weight.dim() == 1 and weight.shape[0] == channels,
            lambda: f"{name} must have shape [{channels}], got {list(weight.shape)}",
        )


def check_arguments(x: Tensor, scale: Tensor | None, bias: Tensor | None, activation: str, axis: int) -> int:
    """The channel dim; raises on what the kernels would reject, so tracing fails where eager would."""
    parse_activation(activation)
    dim = channel_dim(x, axis)
    _check_weight("scale", scale, x.shape[dim])
    _check_weight("bias", bias, x.shape[dim])
    return dim


def launch(x, scale, bias, activation: Activation, dim: int, wrap=no_wrap) -> Tensor:
    """The Triton launch: X as [rows, cols] with the channel as the column (channel axis last) or as
    ``row % channels`` (the dims after it are the columns)."""
    x = x if x.is_contiguous() else x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    channels = x.shape[dim]
    per_row = dim != x.dim() - 1
    cols = x.shape[dim + 1 :].numel() if per_row else channels
    launcher(_KERNEL, "launch_affine_act")(
        x.view(-1, cols), flat(scale), flat(bias), y.view(-1, cols),
        channels=channels, per_row=per_row, activation=int(activation), wrap=wrap,
    )  # fmt: skip
    return y


def _affine_act(x, scale, bias, activation, axis, wrap):
    if x.is_cuda:
        dim = check_arguments(x, scale, bias, activation, axis)  # (the kernel would read past a short scale)
        return launch(x, scale, bias, parse_activation(activation), dim, wrap)
    return _affine_act_math(x, scale, bias, activation, axis)


def _affine_act_math(x, scale, bias, activation, axis):
    dim = check_arguments(x, scale, bias, activation, axis)
    return torch_math.affine_act(x, scale, bias, parse_activation(activation), dim)


def _affine_act_fake(x, scale, bias, activation, axis):
    check_arguments(x, scale, bias, activation, axis)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


IMPLS = {"affine_act": TorchImpl(_affine_act, _affine_act_fake, math=_affine_act_math)}
