"""The fused ops' math in plain PyTorch: the CPU implementation and the autograd formulas.

Statistics and arithmetic run in float32 (float64 for float64 inputs, so gradients can be checked
in double precision); results take the input's dtype. A residual is added in storage precision,
as the unfused graph and the Triton kernel do, and the rounded sum is what gets normalized.
Layer norm's statistics are taken of the input shifted by its mean, as the C++ CPU kernel takes them
(graphopt/ort/src/cpu_rows.cc): rows with a large common offset keep their precision.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from graphopt.fused.table import Activation, Norm

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _as(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return None if t is None else t.to(dtype)


def activate(kind: Activation, z: torch.Tensor) -> torch.Tensor:
    if kind is Activation.IDENTITY:
        return z
    if kind is Activation.RELU:
        return torch.relu(z)
    if kind is Activation.TANH:
        return torch.tanh(z)
    if kind is Activation.GELU:
        return F.gelu(z)
    if kind is Activation.GELU_TANH:
        return F.gelu(z, approximate="tanh")
    if kind is Activation.SILU:
        return F.silu(z)
    if kind is Activation.SIGMOID:
        return torch.sigmoid(z)
    raise AssertionError(kind)


def activation_grad(kind: Activation, z: torch.Tensor) -> torch.Tensor | None:
    """d act(z) / dz, or None for the identity (a factor of one)."""
    if kind is Activation.IDENTITY:
        return None
    if kind is Activation.RELU:
        return (z > 0).to(z.dtype)
    if kind is Activation.TANH:
        t = torch.tanh(z)
        return 1.0 - t * t
    if kind is Activation.GELU:
        return 0.5 * (1.0 + torch.erf(z * _SQRT1_2)) + z * torch.exp(-0.5 * z * z) * _INV_SQRT_2PI
    if kind is Activation.GELU_TANH:
        z2 = z * z
        t = torch.tanh(_SQRT_2_OVER_PI * z * (1.0 + _GELU_TANH_CUBIC * z2))
        inner_grad = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_CUBIC * z2)
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * inner_grad
    if kind is Activation.SILU:
        s = torch.sigmoid(z)
        return s * (1.0 + z * (1.0 - s))
    if kind is Activation.SIGMOID:
        s = torch.sigmoid(z)
        return s * (1.0 - s)
    raise AssertionError(kind)


def residual_sum(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """x + residual computed in float32 and rounded once to x's dtype."""
    cd = compute_dtype(x.dtype)
    return (x.to(cd) + residual.to(cd)).to(x.dtype)


def norm_act(x, weight, bias, norm: Norm, activation: Activation, eps: float, axis: int) -> torch.Tensor:
    """act(norm(x) * weight + bias) over dimensions [axis, rank), in x's dtype."""
    cd = compute_dtype(x.dtype)
    s = x.to(cd)
    shape = s.shape[axis:]
    w = _as(weight, cd)
    if norm is Norm.LAYER:
        # Not F.layer_norm: its statistics lose the low bits of rows with a large common offset
        # (1000 + 0.1 * noise: 8e-4 off in float32, 0.15 after a scale of 200).
        z, _ = _layer_statistics(s, tuple(range(axis % s.dim(), s.dim())), eps)
        if w is not None:
            z = z * w
        if bias is not None:
            z = z + bias.to(cd)
    else:
        z = F.rms_norm(s, shape, w, eps)
        if bias is not None:
            z = z + bias.to(cd)
    return activate(activation, z).to(x.dtype).contiguous()


def norm_act_linear(
    x, weight, bias, linear_weight, linear_bias, norm: Norm, activation: Activation, eps: float,
    out_activation: Activation,
) -> torch.Tensor:  # fmt: skip
    cd = compute_dtype(x.dtype)
    hidden = norm_act(x.to(cd), weight, bias, norm, activation, eps, x.dim() - 1)
    y = F.linear(hidden, linear_weight.to(cd), _as(linear_bias, cd))
    return activate(out_activation, y).to(x.dtype).contiguous()


def _layer_statistics(s: torch.Tensor, dims: tuple[int, ...], eps: float):
    """(normalized s, 1 / std) of layer norm over ``dims``, taken of s minus its mean there (the
    pivot): differences of nearby floats are exact, so a large common offset costs no precision,
    and the mean of the shifted row corrects the pivot's rounding. Both are taken in float64: a
    float32 sum or square beyond 3.4e38 (near float32's top, or a damaged weight's product) would
    make them infinite."""
    wide = torch.float64
    shifted = s - s.to(wide).mean(dims, keepdim=True).to(s.dtype)
    var, mean = torch.var_mean(shifted.to(wide), dims, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps).to(s.dtype)
    return (shifted - mean.to(s.dtype)) * rstd, rstd


def _statistics(s: torch.Tensor, norm: Norm, eps: float, dims: tuple[int, ...]):
    """(normalized s, 1 / std) over ``dims``, recomputed for the backward pass."""
    if norm is Norm.LAYER:
        return _layer_statistics(s, dims, eps)
    rstd = torch.rsqrt(s.square().mean(dims, keepdim=True) + eps)
    return s * rstd, rstd


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
    n, rstd = _statistics(s, norm, eps, dims)
    w = _as(weight, cd)
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
    out_grad = activation_grad(out_activation, F.linear(hidden, lw, _as(linear_bias, cd)))
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
