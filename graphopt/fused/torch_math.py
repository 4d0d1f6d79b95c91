"""Math the fused ops share in plain PyTorch (activations and their derivatives, norm statistics),
for their CPU implementations and autograd formulas (each op's ``torch_math.py``).

Statistics and arithmetic run in float32 (float64 for float64 inputs, so gradients can be checked
in double precision); results take the input's dtype. A residual is added in storage precision,
as the unfused graph and the Triton kernel do, and the rounded sum is what gets normalized.
The CPU implementations call the native ops the fusion replaced (``layer_norm``, ``group_norm``, ...):
a CPU has no launch to save, so they cost and compute what the unfused program does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from graphopt.fused.spec import Activation, Norm

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def as_dtype(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return t if t is None or t.dtype == dtype else t.to(dtype)


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


def norm_statistics(s: torch.Tensor, norm: Norm, eps: float, dims: tuple[int, ...]):
    """(normalized s, 1 / std) over ``dims``, recomputed for the backward pass."""
    if norm is Norm.LAYER:
        var, mean = torch.var_mean(s, dims, correction=0, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        return (s - mean) * rstd, rstd
    rstd = torch.rsqrt(s.square().mean(dims, keepdim=True) + eps)
    return s * rstd, rstd
