"""AffineAct: Y = activation(X * Scale + Bias), Scale and Bias of [X.shape[axis]]."""

from __future__ import annotations

from graphopt.fused.spec import Activation, Attribute, FusedOp, Port, TorchForm, activation_reference


def channel_dim(rank: int, axis: int) -> int:
    """The non-negative channel dimension ``axis`` names in a tensor of ``rank``; raises when out of range."""
    dim = axis + rank if axis < 0 else axis
    if not 0 <= dim < rank:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {rank}")
    return dim


def reference(x, scale=None, bias=None, *, activation, axis):
    """act(x * scale + bias) in float64, scale and bias of shape [x.shape[axis]]."""
    import numpy as np

    z = np.asarray(x, dtype=np.float64)
    dim = channel_dim(z.ndim, axis)
    shape = [1] * z.ndim
    shape[dim] = -1
    with np.errstate(all="ignore"):  # (inf and NaN inputs give what float64 arithmetic gives)
        if scale is not None:
            z = z * np.asarray(scale, dtype=np.float64).reshape(shape)
        if bias is not None:
            z = z + np.asarray(bias, dtype=np.float64).reshape(shape)
        return activation_reference(Activation.parse(activation), z)


def _shapes(present, shapes):
    return [shapes[0]]  # Y has X's shape


def _describe(attrs, present) -> list[str]:
    return [str(attrs.get("activation", "")), f"axis {attrs.get('axis', -1)}"]


AFFINE_ACT = FusedOp(
    name="AffineAct",
    ir_name="affine_act",
    package=__package__,
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
        Attribute("activation", Activation, "identity", "applied to X * Scale + Bias"),
        Attribute("axis", int, -1, "the channel axis Scale and Bias run along", tag="axis{}"),
    ),
    torch_forms=(TorchForm("affine_act", ("X", "Scale", "Bias"), ("Y",)),),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
