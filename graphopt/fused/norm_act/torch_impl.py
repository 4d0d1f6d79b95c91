"""NormAct's torch ops: ``norm_act`` and ``add_norm_act`` (with a residual, returning the sum too).

On CUDA the body launches the Triton kernel (``triton_kernel.launch_norm_act``); elsewhere it runs
the plain-torch math (``torch_math``). ``wrap`` is ``torch.library.wrap_triton`` when traced.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.broadcast_rows import row_broadcast
from graphopt.fused.norm_act import torch_math
from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_args import (
    cast_grad,
    check_norm_arguments,
    first_norm_dim,
    parse_activation,
    parse_norm,
)
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_math import residual_sum
from graphopt.fused.torch_triton import empty_rows, flat, launcher, no_wrap, rows_view, shaped

_KERNEL = f"{__package__}.triton_kernel"


def operand_rows(operand: Tensor | None, x: Tensor, dim: int, full, name: str = "residual"):
    """(inner, groups) of an operand broadcast over x's rows (``full`` when it has x's shape; one of
    the normalized dims' shape is one row for all, (1, 1)); a bad shape raises, naming why."""
    if operand is None or tuple(operand.shape) == tuple(x.shape):
        return full
    rows = row_broadcast(operand.shape, x.shape, dim)
    torch._check(not isinstance(rows, str), lambda: f"{name} {rows}")
    return rows


def launch(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, residual: Tensor | None,
    norm: Norm, activation: Activation, eps: float, dim: int, wrap=no_wrap,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """(y, x + residual or None) on CUDA, normalizing x over dimensions [dim, rank)."""
    if x.numel() == 0:
        return torch.empty_like(x), None if residual is None else torch.empty_like(x)
    x2d = rows_view(x, x.shape[dim:].numel())
    normalized = tuple(x.shape[dim:])

    def rows_of(operand):  # (the usual shapes spend no time here)
        if operand is None or tuple(operand.shape) == normalized:
            return (1, 1)
        # (one of X's shape has a row per row of X)
        return operand_rows(operand, x, dim, None, "scale or bias") or (1, x2d.shape[0])

    y2d = empty_rows(x2d)
    total = None if residual is None else empty_rows(x2d)
    launcher(_KERNEL, "launch_norm_act")(
        x2d,
        flat(weight),
        flat(bias),
        None if residual is None else rows_view(residual, x2d.shape[1]),
        y2d,
        total,
        norm=int(norm),
        activation=int(activation),
        eps=eps,
        wrap=wrap,
        scale_rows=rows_of(weight),
        bias_rows=rows_of(bias),
        residual_rows=None if residual is None else operand_rows(residual, x, dim, None),
    )
    return shaped(y2d, x.shape), None if total is None else shaped(total, x.shape)


# --- norm_act -------------------------------------------------------------------------------------


def _norm_act(x, weight, bias, norm, activation, eps, axis, wrap):
    if x.is_cuda:
        n, a, dim = parse_norm(norm), parse_activation(activation), first_norm_dim(x, axis)
        return launch(x, weight, bias, None, n, a, eps, dim, wrap)[0]
    return _norm_act_math(x, weight, bias, norm, activation, eps, axis)


def _norm_act_math(x, weight, bias, norm, activation, eps, axis):
    n, a, dim = parse_norm(norm), parse_activation(activation), first_norm_dim(x, axis)
    return torch_math.norm_act(x, weight, bias, n, a, eps, dim)


def _norm_act_fake(x, weight, bias, norm, activation, eps, axis):
    check_norm_arguments(x, norm, activation, axis)
    return x.new_empty(x.shape)


def _norm_act_setup(ctx, inputs, output):
    x, weight, bias, norm, activation, eps, axis = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.params = (parse_norm(norm), parse_activation(activation), eps, first_norm_dim(x, axis))


def _norm_act_backward(ctx, grad_y):
    x, weight, bias = ctx.saved_tensors
    grad_x, grad_w, grad_b = torch_math.norm_act_backward(
        grad_y, x, weight, bias, *ctx.params, needs=tuple(ctx.needs_input_grad[:3])
    )
    return cast_grad(grad_x, x), cast_grad(grad_w, weight), cast_grad(grad_b, bias), None, None, None, None


# --- add_norm_act ---------------------------------------------------------------------------------


def _add_norm_act(x, residual, weight, bias, norm, activation, eps, axis, wrap):
    if x.is_cuda:
        n, a, dim = parse_norm(norm), parse_activation(activation), first_norm_dim(x, axis)
        return launch(x, weight, bias, residual, n, a, eps, dim, wrap)
    return _add_norm_act_math(x, residual, weight, bias, norm, activation, eps, axis)


def _add_norm_act_math(x, residual, weight, bias, norm, activation, eps, axis):
    n, a, dim = parse_norm(norm), parse_activation(activation), first_norm_dim(x, axis)
    operand_rows(residual, x, dim, None)
    # contiguous like the CUDA kernel's and the fake's outputs (an add keeps a transposed x's layout):
    # a traced program's later views rely on the strides the fake promised
    s = residual_sum(x, residual).contiguous()
    return torch_math.norm_act(s, weight, bias, n, a, eps, dim), s


def _add_norm_act_fake(x, residual, weight, bias, norm, activation, eps, axis):
    check_norm_arguments(x, norm, activation, axis)
    operand_rows(residual, x, first_norm_dim(x, axis), None)
    return x.new_empty(x.shape), x.new_empty(x.shape)


def _add_norm_act_setup(ctx, inputs, output):
    x, residual, weight, bias, norm, activation, eps, axis = inputs
    ctx.save_for_backward(output[1], weight, bias)
    ctx.dtypes = (x.dtype, residual.dtype)
    ctx.residual_shape = residual.shape
    ctx.params = (parse_norm(norm), parse_activation(activation), eps, first_norm_dim(x, axis))


def _add_norm_act_backward(ctx, grad_y, grad_sum):
    s, weight, bias = ctx.saved_tensors
    needs_x, needs_r, needs_w, needs_b = ctx.needs_input_grad[:4]
    grad_s, grad_w, grad_b = torch_math.norm_act_backward(
        grad_y, s, weight, bias, *ctx.params, needs=(needs_x or needs_r, needs_w, needs_b)
    )
    if grad_s is not None and grad_sum is not None:
        grad_s = grad_s + grad_sum
    x_dtype, r_dtype = ctx.dtypes
    grad_x = grad_s.to(x_dtype) if needs_x else None
    # (a broadcast residual's gradient is summed over the rows that read it)
    grad_r = grad_s.sum_to_size(ctx.residual_shape).to(r_dtype) if needs_r else None
    return grad_x, grad_r, cast_grad(grad_w, weight), cast_grad(grad_b, bias), None, None, None, None


IMPLS = {
    "norm_act": TorchImpl(
        _norm_act, _norm_act_fake, _norm_act_backward, _norm_act_setup, math=_norm_act_math
    ),
    "add_norm_act": TorchImpl(
        _add_norm_act, _add_norm_act_fake, _add_norm_act_backward, _add_norm_act_setup,
        math=_add_norm_act_math,
    ),
}  # fmt: skip
