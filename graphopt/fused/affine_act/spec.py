"""The AffineAct op: ports, attributes and float64 reference."""

from __future__ import annotations

import numpy as np

from graphopt.fused.table import Activation, Attribute, FusedOp, Port, activation_reference


def channel_dim(rank: int, axis: int) -> int:
    """The non-negative channel dimension ``axis`` names in a tensor of ``rank``; raises when out of range."""
    dim = axis + rank if axis < 0 else axis
    if not 0 <= dim < rank:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def _broadcast(weight, rank: int, dim: int) -> np.ndarray:
    shape = [1] * rank
    shape[dim] = -1
    return np.asarray(weight, dtype=np.float64).reshape(shape)


def affine_act_reference(x, scale=None, bias=None, *, activation, axis):
    """act(x * scale + bias) in float64, scale and bias of shape [x.shape[axis]]."""
    z = np.asarray(x, dtype=np.float64)
    dim = channel_dim(z.ndim, axis)
    with np.errstate(all="ignore"):  # (inf and NaN inputs give what float64 arithmetic gives)
        if scale is not None:
            z = z * _broadcast(scale, z.ndim, dim)
        if bias is not None:
            z = z + _broadcast(bias, z.ndim, dim)
        return activation_reference(Activation.parse(activation), z)


AFFINE_ACT = FusedOp(
    name="AffineAct",
    torch_name="affine_act",
    doc=(
        "Y = activation(X * Scale + Bias), Scale and Bias of shape [X.shape[axis]] broadcast along "
        "the channel axis, in float32 arithmetic: a linear layer's bias and activation (axis -1), or "
        "an inference batch norm and its activation (axis 1)."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc="shape [X.shape[axis]]"),
        Port("Bias", optional=True, doc="shape [X.shape[axis]]"),
    ),
    outputs=(Port("Y", doc="shape and type of X"),),
    attributes=(
        Attribute("activation", str, "identity", "applied to X * Scale + Bias"),
        Attribute("axis", int, -1, "the channel axis Scale and Bias run along"),
    ),
    reference=affine_act_reference,
)
