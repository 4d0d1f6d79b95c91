"""NormAct's math in plain PyTorch: the CPU implementation and the autograd formula.

Statistics and arithmetic run in float32 (float64 for float64 inputs, so gradients can be checked
in double precision); results take the input's dtype. A residual is added in storage precision
(``torch_math.residual_sum``), and the rounded sum is what gets normalized.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_math import (
    activate,
    activation_grad,
    as_dtype,
    compute_dtype,
    layer_statistics,
    norm_statistics,
)


def norm_act(x, weight, bias, norm: Norm, activation: Activation, eps: float, axis: int) -> torch.Tensor:
    """act(norm(x) * weight + bias) over dimensions [axis, rank), in x's dtype."""
    cd = compute_dtype(x.dtype)
    s = x.to(cd)
    shape = s.shape[axis:]
    w = as_dtype(weight, cd)
    if norm is Norm.LAYER:
        # Not F.layer_norm: its statistics lose the low bits of rows with a large common offset
        # (1000 + 0.1 * noise: 8e-4 off in float32, 0.15 after a scale of 200).
        z, _ = layer_statistics(s, tuple(range(axis % s.dim(), s.dim())), eps)
        if w is not None:
            z = z * w
        if bias is not None:
            z = z + bias.to(cd)
    else:
        z = F.rms_norm(s, shape, w, eps)
        if bias is not None:
            z = z + bias.to(cd)
    return activate(activation, z).to(x.dtype).contiguous()


def norm_act_backward(
    grad_y, s, weight, bias, norm: Norm, activation: Activation, eps: float, axis: int,
    needs: tuple[bool, bool, bool],
):  # fmt: skip
    """Gradients (d s, d weight, d bias) of act(norm(s) * weight + bias), in the compute dtype.

    ``s`` is the normalized input (x, or the rounded residual sum); ``needs`` says which of the
    three are wanted (the others come back as None).
    """
    cd = compute_dtype(s.dtype)
    s = s.to(cd)
    dims = tuple(range(axis, s.dim()))
    batch_dims = tuple(range(axis))
    n, rstd = norm_statistics(s, norm, eps, dims)
    w = as_dtype(weight, cd)
    grad = grad_y.to(cd)
    z = n * w if w is not None else n
    if bias is not None:
        z = z + bias.to(cd)
    act_grad = activation_grad(activation, z)
    if act_grad is not None:
        grad = grad * act_grad
    grad_weight = (grad * n).sum(batch_dims) if needs[1] and weight is not None else None
    grad_bias = grad.sum(batch_dims) if needs[2] and bias is not None else None
    grad_s = None
    if needs[0]:
        grad_n = grad * w if w is not None else grad
        projection = (grad_n * n).mean(dims, keepdim=True)
        if norm is Norm.LAYER:
            grad_s = rstd * (grad_n - grad_n.mean(dims, keepdim=True) - n * projection)
        else:
            grad_s = rstd * (grad_n - n * projection)
    return grad_s, grad_weight, grad_bias
