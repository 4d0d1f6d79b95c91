"""Glue between torch tensors and the Triton launchers of ``graphopt.kernels``.

The launchers take [rows, cols] views with a contiguous last dimension and preallocated
contiguous outputs; these functions shape the op's arguments that way. ``wrap`` is
``torch.library.wrap_triton`` when tracing (so torch.compile sees the kernel) and ``eager_launch`` in
eager mode. The kernel modules are imported on first use: importing them needs Triton.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from graphopt.dependencies import require
from graphopt.fused.table import Activation, Norm

# Eager launches go through ``torch_launch.cached`` (a bench turns it off to compare).
CACHED_LAUNCH = True


def no_wrap(kernel):
    return kernel


def eager_launch(kernel):
    """The ``wrap`` of eager calls: the kernel's cached launcher (see ``torch_launch``)."""
    if not CACHED_LAUNCH:
        return kernel
    from graphopt.fused.torch_launch import cached

    return cached(kernel)


def _require_triton() -> None:
    require("triton", "running graphopt's fused ops on CUDA tensors")


@functools.cache
def _launch_norm_act():
    _require_triton()
    from graphopt.kernels.norm_act import launch_norm_act

    return launch_norm_act


@functools.cache
def _launch_norm_act_linear():
    _require_triton()
    from graphopt.kernels.norm_act_linear import launch_norm_act_linear

    return launch_norm_act_linear


def _rows(t: Tensor, cols) -> Tensor:
    """``t`` as [rows, cols] with a contiguous last dimension; a view where strides allow."""
    if t.dim() == 2 and t.shape[1] == cols and t.stride(1) == 1:
        return t  # the common case, kept free of tensor calls (each costs microseconds)
    t2d = t.reshape(-1, cols)
    return t2d if t2d.stride(-1) == 1 else t2d.contiguous()


def _flat(t: Tensor | None) -> Tensor | None:
    if t is None or (t.dim() == 1 and t.stride(0) == 1):
        return t
    return t.reshape(-1).contiguous()


def _empty_rows(t2d: Tensor) -> Tensor:
    return torch.empty_like(t2d, memory_format=torch.contiguous_format)


def _shaped(t2d: Tensor, shape) -> Tensor:
    return t2d if t2d.shape == shape else t2d.view(shape)


def norm_act(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, residual: Tensor | None,
    norm: Norm, activation: Activation, eps: float, dim: int, wrap=no_wrap,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """(y, x + residual or None), normalizing x over dimensions [dim, rank)."""
    if x.numel() == 0:
        return torch.empty_like(x), None if residual is None else torch.empty_like(x)
    x2d = _rows(x, x.shape[dim:].numel())
    y2d = _empty_rows(x2d)
    residual_sum = None if residual is None else _empty_rows(x2d)
    _launch_norm_act()(
        x2d,
        _flat(weight),
        _flat(bias),
        None if residual is None else _rows(residual, x2d.shape[1]),
        y2d,
        residual_sum,
        norm=int(norm),
        activation=int(activation),
        eps=eps,
        wrap=wrap,
    )
    return _shaped(y2d, x.shape), None if residual_sum is None else _shaped(residual_sum, x.shape)


def norm_act_linear(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, linear_weight: Tensor,
    linear_bias: Tensor | None, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation, wrap=no_wrap,
) -> Tensor:  # fmt: skip
    shape = (*x.shape[:-1], linear_weight.shape[0])
    if x.numel() == 0 or linear_weight.shape[0] == 0:
        return x.new_empty(shape)
    x2d = _rows(x, x.shape[-1])
    y2d = x2d.new_empty((x2d.shape[0], linear_weight.shape[0]))
    _launch_norm_act_linear()(
        x2d,
        _flat(weight),
        _flat(bias),
        linear_weight if linear_weight.is_contiguous() else linear_weight.contiguous(),
        _flat(linear_bias),
        y2d,
        norm=int(norm),
        activation=int(activation),
        eps=eps,
        out_activation=int(out_activation),
        wrap=wrap,
    )
    return _shaped(y2d, shape)
