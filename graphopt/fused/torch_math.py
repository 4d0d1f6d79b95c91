"""Math the fused ops share in plain PyTorch (activations and their derivatives, norm statistics),
for their CPU implementations and autograd formulas (each op's ``torch_math.py``).

Statistics and arithmetic run in float32 (float64 for float64 inputs, so gradients can be checked
in double precision); results take the input's dtype. A residual is added in storage precision,
as the unfused graph and the Triton kernel do, and the rounded sum is what gets normalized.
The CPU implementations call the native ops the fusion replaced (``layer_norm``, ``group_norm``, ...):
a CPU has no launch to save, so they cost and compute what the unfused program does.

An eager call that autograd records runs as the unfused program did (torch_direct.py), and there the
native ops run in the storage dtype where every floating operand has it, fp16 or bf16
(``storage_precision``): as the unfused program's ops did, each rounding its own result, with no
casts to float32 and back around them (six launches for a layer norm and its activation, not two).
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F

from graphopt.fused.spec import Activation, Norm

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


_SIXTEEN_BIT = (torch.float16, torch.bfloat16)
_state = threading.local()


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.float64:
        return torch.float64
    if dtype in _SIXTEEN_BIT and getattr(_state, "storage", False):
        return dtype
    return torch.float32


def storage_precision(math, args):
    """``math(*args)`` with native ops in the storage dtype where every floating tensor among ``args``
    is fp16, or every one bf16 (the unfused program's own precision); else as ``compute_dtype`` says."""
    dtypes = {a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _SIXTEEN_BIT:
        return math(*args)
    _state.storage = True
    try:
        return math(*args)
    finally:
        _state.storage = False


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
