"""NormActLinear's math in plain PyTorch: the CPU implementation and the autograd formula.

The native ops the fusion replaced run in float32 and the result is rounded once: NormAct's math
(``layer_norm`` / ``rms_norm``, then the activation), then ``linear`` for one [K, D] weight or a
batched ``matmul`` for one matrix per slice, the bias, the output activation. A residual is added in
storage precision first (``torch_math.residual_sum``), as NormAct's is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graphopt.fused.norm_act.torch_math import norm_act, norm_act_backward
from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_math import activate, activation_grad, as_dtype, compute_dtype


def linear(hidden, linear_weight, linear_bias):
    """hidden @ weight^T + bias: ``F.linear`` for a [K, D] weight and a [K] (or absent) bias, else
    the batched matmul and the broadcast add that per-slice weights and biases came from."""
    if linear_weight.dim() == 2 and (linear_bias is None or linear_bias.dim() == 1):
        return F.linear(hidden, linear_weight, linear_bias)
    y = torch.matmul(hidden, linear_weight.transpose(-1, -2))
    return y if linear_bias is None else y + linear_bias


def norm_act_linear(
    x, weight, bias, linear_weight, linear_bias, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation,
) -> torch.Tensor:  # fmt: skip
    cd = compute_dtype(x.dtype)
    hidden = norm_act(x.to(cd), weight, bias, norm, activation, eps, x.dim() - 1)
    y = linear(hidden, linear_weight.to(cd), as_dtype(linear_bias, cd))
    return activate(out_activation, y).to(x.dtype).contiguous()


def norm_act_linear_backward(
    grad_y, x, weight, bias, linear_weight, linear_bias, norm: Norm, activation: Activation,
    eps: float, out_activation: Activation, needs: tuple[bool, bool, bool, bool, bool],
):  # fmt: skip
    """Gradients (d x, d weight, d bias, d linear_weight, d linear_bias), in the compute dtype;
    per-slice parameters get theirs summed over the rows that read them."""
    cd = compute_dtype(x.dtype)
    axis = x.dim() - 1
    hidden = norm_act(x.to(cd), weight, bias, norm, activation, eps, axis)
    lw = linear_weight.to(cd)
    grad = grad_y.to(cd)
    out_grad = activation_grad(out_activation, linear(hidden, lw, as_dtype(linear_bias, cd)))
    if out_grad is not None:
        grad = grad * out_grad
    grad_lw = grad_lb = None
    if needs[3] and lw.dim() == 2:
        grad_lw = grad.reshape(-1, grad.shape[-1]).t() @ hidden.reshape(-1, hidden.shape[-1])
    elif needs[3]:
        grad_lw = torch.matmul(grad.transpose(-1, -2), hidden).sum_to_size(lw.shape)
    if needs[4] and linear_bias is not None:
        grad_lb = grad.sum_to_size(linear_bias.shape)
    grad_x = grad_w = grad_b = None
    if any(needs[:3]):
        grad_x, grad_w, grad_b = norm_act_backward(
            torch.matmul(grad, lw), x, weight, bias, norm, activation, eps, axis, needs[:3]
        )
    return grad_x, grad_w, grad_b, grad_lw, grad_lb
