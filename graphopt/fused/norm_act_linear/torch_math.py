"""NormActLinear's math in plain PyTorch: the CPU implementation and the autograd formula."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graphopt.fused.norm_act.torch_math import norm_act, norm_act_backward
from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_math import activate, activation_grad, as_dtype, compute_dtype


def norm_act_linear(
    x, weight, bias, linear_weight, linear_bias, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation,
) -> torch.Tensor:  # fmt: skip
    cd = compute_dtype(x.dtype)
    hidden = norm_act(x.to(cd), weight, bias, norm, activation, eps, x.dim() - 1)
    y = F.linear(hidden, linear_weight.to(cd), as_dtype(linear_bias, cd))
    return activate(out_activation, y).to(x.dtype).contiguous()


def norm_act_linear_backward(
    grad_y, x, weight, bias, linear_weight, linear_bias, norm: Norm, activation: Activation,
    eps: float, out_activation: Activation, needs: tuple[bool, bool, bool, bool, bool],
):  # fmt: skip
    """Gradients (d x, d weight, d bias, d linear_weight, d linear_bias), in the compute dtype."""
    cd = compute_dtype(x.dtype)
    axis = x.dim() - 1
    hidden = norm_act(x.to(cd), weight, bias, norm, activation, eps, axis)
    lw = linear_weight.to(cd)
    grad = grad_y.to(cd)
    out_grad = activation_grad(out_activation, F.linear(hidden, lw, as_dtype(linear_bias, cd)))
    if out_grad is not None:
        grad = grad * out_grad
    grad_2d = grad.reshape(-1, grad.shape[-1])
    grad_lw = grad_2d.t() @ hidden.reshape(-1, hidden.shape[-1]) if needs[3] else None
    grad_lb = grad_2d.sum(0) if needs[4] and linear_bias is not None else None
    grad_x = grad_w = grad_b = None
    if any(needs[:3]):
        grad_x, grad_w, grad_b = norm_act_backward(
            grad @ lw, x, weight, bias, norm, activation, eps, axis, needs[:3]
        )
    return grad_x, grad_w, grad_b, grad_lw, grad_lb
