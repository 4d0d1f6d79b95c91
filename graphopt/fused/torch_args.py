"""Reading the torch ops' arguments, shared by every fused op's ``torch_impl``: string choices
parsed without a profile cost, axes checked as eager and tracing both would, gradients cast back."""

from __future__ import annotations

import torch
from torch import Tensor

from graphopt.fused.spec import Activation, Norm

# String arguments are parsed on every call: plain dict look-ups keep that off the profile.
_NORMS = {n.attr: n for n in Norm}
_ACTIVATIONS = {a.attr: a for a in Activation}


def parse_norm(text: str) -> Norm:
    norm = _NORMS.get(text)
    return norm if norm is not None else Norm.parse(text)  # parse raises the clear error


def parse_activation(text: str) -> Activation:
    activation = _ACTIVATIONS.get(text)
    return activation if activation is not None else Activation.parse(text)


def first_norm_dim(x: Tensor, axis: int) -> int:
    rank = x.dim()
    dim = axis + rank if axis < 0 else axis
    torch._check(0 <= dim < rank, lambda: f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def check_norm_arguments(x: Tensor, norm: str, activation: str, axis: int) -> None:
    """Raises on what the real implementation would reject, so tracing fails where eager would."""
    parse_norm(norm)
    parse_activation(activation)
    first_norm_dim(x, axis)


def cast_grad(grad: Tensor | None, like: Tensor | None) -> Tensor | None:
    return None if grad is None or like is None else grad.to(like.dtype)
