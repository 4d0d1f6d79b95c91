"""NormActLinear's torch ops: ``norm_act_linear`` and ``add_norm_act_linear`` (with a residual,
returning the sum too). Triton on CUDA, plain torch elsewhere; ``wrap`` is
``torch.library.wrap_triton`` when traced."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.broadcast_rows import row_broadcast
from graphopt.fused.norm_act_linear import torch_math
from graphopt.fused.norm_act_linear.spec import weight_rows
from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_args import cast_grad, check_norm_arguments, parse_activation, parse_norm
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_math import residual_sum
from graphopt.fused.torch_triton import empty_rows, flat, launcher, no_wrap, rows_view, shaped

_KERNEL = f"{__package__}.triton_kernel"


def _matrices(x: Tensor, linear_weight: Tensor):
    """(inner, groups) of the weight's matrices over x's rows; a bad shape raises, naming why."""
    rows = weight_rows(linear_weight.shape, x.shape)
    torch._check(not isinstance(rows, str), lambda: f"linear_weight {rows}")
    return rows


def _rows(operand: Tensor | None, shape, name: str):
    """(inner, groups) of an operand read row by row against ``shape`` (X's, or Y's for the linear
    bias); a bad shape raises, naming why."""
    if operand is None:
        return (1, 1)
    rows = row_broadcast(operand.shape, shape, -1)
    torch._check(not isinstance(rows, str), lambda: f"{name} {rows}")
    return rows


def check_shapes(x: Tensor, weight, bias, linear_weight: Tensor, linear_bias, residual) -> tuple:
    """Y's shape, after checking every operand as the kernels read them (shape errors name it)."""
    torch._check(x.dim() >= 1, lambda: "x must have at least one dimension")
    _matrices(x, linear_weight)
    for name, operand in (("weight", weight), ("bias", bias), ("residual", residual)):
        _rows(operand, x.shape, name)
    shape = (*x.shape[:-1], linear_weight.shape[-2])
    _rows(linear_bias, shape, "linear_bias")
    return shape


def launch(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, linear_weight: Tensor,
    linear_bias: Tensor | None, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation, residual: Tensor | None = None, wrap=no_wrap,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """(y, x + residual or None) on CUDA."""
    k, d = linear_weight.shape[-2], x.shape[-1]
    shape = (*x.shape[:-1], k)
    if x.numel() == 0:
        return x.new_empty(shape), None if residual is None else torch.empty_like(x)
    x2d = rows_view(x, d)
    y2d = x2d.new_empty((x2d.shape[0], k))
    total = None if residual is None else empty_rows(x2d)
    matrices = _matrices(x, linear_weight)
    # [K, D], or [groups, K, D] matrices, contiguous
    lw = linear_weight.reshape(k, d) if matrices.groups == 1 else linear_weight.reshape(-1, k, d)
    launcher(_KERNEL, "launch_norm_act_linear")(
        x2d,
        flat(weight),
        flat(bias),
        lw if lw.is_contiguous() else lw.contiguous(),
        flat(linear_bias),
        y2d,
        norm=int(norm),
        activation=int(activation),
        eps=eps,
        out_activation=int(out_activation),
        wrap=wrap,
        residual2d=None if residual is None else rows_view(residual, d),
        residual_sum=total,
        scale_rows=_rows(weight, x.shape, "weight"),
        bias_rows=_rows(bias, x.shape, "bias"),
        residual_rows=None if residual is None else _rows(residual, x.shape, "residual"),
        weight_rows=matrices,
        linear_bias_rows=_rows(linear_bias, shape, "linear_bias"),
    )
    return shaped(y2d, shape), None if total is None else shaped(total, x.shape)


# --- norm_act_linear ------------------------------------------------------------------------------


def _body(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation, wrap):
    if x.is_cuda:
        n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
        return launch(x, weight, bias, linear_weight, linear_bias, n, a, eps, out, wrap=wrap)[0]
    return _math(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation)


def _math(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
    check_shapes(x, weight, bias, linear_weight, linear_bias, None)
    return torch_math.norm_act_linear(x, weight, bias, linear_weight, linear_bias, n, a, eps, out)


def _fake(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    check_norm_arguments(x, norm, activation, -1)
    parse_activation(out_activation)
    return x.new_empty(check_shapes(x, weight, bias, linear_weight, linear_bias, None))


def _setup(ctx, inputs, output):
    x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation = inputs
    ctx.save_for_backward(x, weight, bias, linear_weight, linear_bias)
    ctx.params = (parse_norm(norm), parse_activation(activation), eps, parse_activation(out_activation))


def _backward(ctx, grad_y):
    saved = ctx.saved_tensors
    grads = torch_math.norm_act_linear_backward(
        grad_y, *saved, *ctx.params, needs=tuple(ctx.needs_input_grad[:5])
    )
    return (*(cast_grad(g, t) for g, t in zip(grads, saved, strict=True)), None, None, None, None)


# --- add_norm_act_linear --------------------------------------------------------------------------


def _add_body(
    x, residual, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation, wrap
):
    if x.is_cuda:
        n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
        return launch(x, weight, bias, linear_weight, linear_bias, n, a, eps, out, residual, wrap=wrap)
    return _add_math(
        x, residual, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation
    )


def _add_math(x, residual, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
    check_shapes(x, weight, bias, linear_weight, linear_bias, residual)
    # contiguous like the CUDA kernel's and the fake's outputs (see NormAct's add_norm_act)
    s = residual_sum(x, residual).contiguous()
    return torch_math.norm_act_linear(s, weight, bias, linear_weight, linear_bias, n, a, eps, out), s


def _add_fake(x, residual, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    check_norm_arguments(x, norm, activation, -1)
    parse_activation(out_activation)
    shape = check_shapes(x, weight, bias, linear_weight, linear_bias, residual)
    return x.new_empty(shape), x.new_empty(x.shape)


def _add_setup(ctx, inputs, output):
    x, residual, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation = inputs
    ctx.save_for_backward(output[1], weight, bias, linear_weight, linear_bias)
    ctx.dtypes = (x.dtype, residual.dtype)
    ctx.residual_shape = residual.shape
    ctx.params = (parse_norm(norm), parse_activation(activation), eps, parse_activation(out_activation))


def _add_backward(ctx, grad_y, grad_sum):
    s, *params = ctx.saved_tensors
    needs_x, needs_r, *needs_params = ctx.needs_input_grad[:6]
    grad_s, *grads = torch_math.norm_act_linear_backward(
        grad_y, s, *params, *ctx.params, needs=(needs_x or needs_r, *needs_params)
    )
    if grad_s is not None and grad_sum is not None:
        grad_s = grad_s + grad_sum
    x_dtype, r_dtype = ctx.dtypes
    grad_x = grad_s.to(x_dtype) if needs_x else None
    # (a broadcast residual's gradient is summed over the rows that read it)
    grad_r = grad_s.sum_to_size(ctx.residual_shape).to(r_dtype) if needs_r else None
    casts = (cast_grad(g, t) for g, t in zip(grads, params, strict=True))
    return (grad_x, grad_r, *casts, None, None, None, None)


IMPLS = {
    "norm_act_linear": TorchImpl(_body, _fake, _backward, _setup, math=_math),
    "add_norm_act_linear": TorchImpl(_add_body, _add_fake, _add_backward, _add_setup, math=_add_math),
}
