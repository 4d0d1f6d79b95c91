"""NormAct's math in plain PyTorch: the CPU implementation and the autograd formula.

Arithmetic runs in float32 (float64 for float64 inputs, so gradients can be checked in double
precision); results take the input's dtype. A residual is added in storage precision
(``torch_math.residual_sum``), and the rounded sum is what gets normalized.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graphopt.fused.spec import Activation, Norm
from graphopt.fused.torch_math import activate, activation_grad, as_dtype, compute_dtype, norm_statistics


def norm_act(x, weight, bias, norm: Norm, activation: Activation, eps: float, axis: int) -> torch.Tensor:
    """act(norm(x) * weight + bias) over dimensions [axis, rank), in x's dtype.

    The native ops the fusion replaced (``layer_norm`` / ``rms_norm``, then the activation), run in
    float32 and rounded once: on a CPU there is no launch to save, so the op costs what they cost
    and computes what they compute. A scale or bias broadcast over x's rows (per slice) is applied
    after the norm."""
    cd = compute_dtype(x.dtype)
    s = as_dtype(x, cd)
    shape = tuple(s.shape[axis:])
    w, b = as_dtype(weight, cd), as_dtype(bias, cd)
    native_w = w if w is not None and tuple(w.shape) == shape else None
    # (a bias goes into layer_norm only where the scale does, or there is none: (z * w) + b)
    native_b = b if norm is Norm.LAYER and b is not None and tuple(b.shape) == shape else None
    if native_b is not None and w is not None and native_w is None:
        native_b = None
    if norm is Norm.LAYER:
        z = F.layer_norm(s, shape, native_w, native_b, eps)
    else:
        z = F.rms_norm(s, shape, native_w, eps)
    if w is not None and native_w is None:
        z = z * w
    if b is not None and native_b is None:
        z = z + b
    return as_dtype(activate(activation, z), x.dtype).contiguous()


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
    grad_weight = _sum_to(grad * n, weight, batch_dims) if needs[1] and weight is not None else None
    grad_bias = _sum_to(grad, bias, batch_dims) if needs[2] and bias is not None else None
    grad_s = None
    if needs[0]:
        grad_n = grad * w if w is not None else grad
        projection = (grad_n * n).mean(dims, keepdim=True)
        if norm is Norm.LAYER:
            grad_s = rstd * (grad_n - grad_n.mean(dims, keepdim=True) - n * projection)
        else:
            grad_s = rstd * (grad_n - n * projection)
    return grad_s, grad_weight, grad_bias


def _sum_to(grad, param, batch_dims):
    """``grad`` summed over the rows that read ``param`` (all of them unless it is per slice)."""
    if param.dim() == grad.dim() - len(batch_dims):
        return grad.sum(batch_dims)
    return grad.sum_to_size(param.shape)
