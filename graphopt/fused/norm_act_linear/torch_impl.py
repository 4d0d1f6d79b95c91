"""NormActLinear's torch op ``norm_act_linear``: Triton on CUDA, plain torch elsewhere."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.norm_act_linear import torch_math
from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_args import cast_grad, check_norm_arguments, parse_activation, parse_norm
from graphopt.fused.torch_impl import TorchImpl
from graphopt.fused.torch_triton import flat, launcher, no_wrap, rows_view, shaped

_KERNEL = f"{__package__}.triton_kernel"


def launch(
    x: Tensor, weight: Tensor | None, bias: Tensor | None, linear_weight: Tensor,
    linear_bias: Tensor | None, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation, wrap=no_wrap,
) -> Tensor:  # fmt: skip
    """The op on CUDA."""
    shape = (*x.shape[:-1], linear_weight.shape[0])
    if x.numel() == 0 or linear_weight.shape[0] == 0:
        return x.new_empty(shape)
    x2d = rows_view(x, x.shape[-1])
    y2d = x2d.new_empty((x2d.shape[0], linear_weight.shape[0]))
    launcher(_KERNEL, "launch_norm_act_linear")(
        x2d,
        flat(weight),
        flat(bias),
        linear_weight if linear_weight.is_contiguous() else linear_weight.contiguous(),
        flat(linear_bias),
        y2d,
        norm=int(norm),
        activation=int(activation),
        eps=eps,
        out_activation=int(out_activation),
        wrap=wrap,
    )
    return shaped(y2d, shape)


def _body(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation, wrap):
    if x.is_cuda:
        n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
        return launch(x, weight, bias, linear_weight, linear_bias, n, a, eps, out, wrap)
    return _math(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation)


def _math(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    n, a, out = parse_norm(norm), parse_activation(activation), parse_activation(out_activation)
    return torch_math.norm_act_linear(x, weight, bias, linear_weight, linear_bias, n, a, eps, out)


def _fake(x, weight, bias, linear_weight, linear_bias, norm, activation, eps, out_activation):
    check_norm_arguments(x, norm, activation, -1)
    parse_activation(out_activation)
    torch._check(x.dim() >= 1, lambda: "x must have at least one dimension")
    torch._check(
        linear_weight.dim() == 2 and linear_weight.shape[1] == x.shape[-1],
        lambda: f"linear_weight must be [K, {x.shape[-1]}], got {list(linear_weight.shape)}",
    )
    return x.new_empty((*x.shape[:-1], linear_weight.shape[0]))


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


IMPLS = {"norm_act_linear": TorchImpl(_body, _fake, _backward, _setup, math=_math)}
