"""The GroupNormAct spec and its float64 reference.

Group norm splits the C channels of an [N, C, *] tensor into ``groups`` groups of C / groups
consecutive channels and normalizes each (sample, group) over its channels and spatial positions,
then scales and shifts per channel (torch's ``nn.GroupNorm``, ONNX ``GroupNormalization`` since
opset 21). The statistics are float32 whatever the storage type.
"""

from __future__ import annotations

import numpy as np

from graphopt.fused.table import Activation, Attribute, FusedOp, Port, activation_reference


def group_norm_reference(
    x: np.ndarray, groups: int, scale: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> np.ndarray:
    """Float64 group norm of ``x`` ([N, C, *]) with per-channel ``scale`` and ``bias``."""
    x = np.asarray(x, dtype=np.float64)
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    centered = grouped - grouped.mean(axis=2, keepdims=True)
    y = (centered / np.sqrt((centered**2).mean(axis=2, keepdims=True) + eps)).reshape(x.shape)
    per_channel = (c,) + (1,) * (x.ndim - 2)
    if scale is not None:
        y = y * np.asarray(scale, dtype=np.float64).reshape(per_channel)
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64).reshape(per_channel)
    return y


def group_norm_act_reference(x, scale=None, bias=None, residual=None, *, groups, activation, epsilon):
    """Returns (y, residual_sum); residual_sum is None when no residual is given."""
    s = np.asarray(x, dtype=np.float64)
    if residual is not None:
        s = s + np.asarray(residual, dtype=np.float64)
    y = activation_reference(
        Activation.parse(activation), group_norm_reference(s, groups, scale, bias, epsilon)
    )
    return y, (s if residual is not None else None)


GROUP_NORM_ACT = FusedOp(
    name="GroupNormAct",
    torch_name="group_norm_act",
    doc=(
        "Y = activation(group_norm(X [+ Residual]) * Scale + Bias) on X of shape [N, C, *]: each "
        "(sample, group of C / groups consecutive channels) normalized with float32 statistics, then "
        "scaled and shifted per channel. With Residual, the second output is X + Residual."
    ),
    inputs=(
        Port("X", doc="shape [N, C, *], C a multiple of groups"),
        Port("Scale", optional=True, doc="shape [C]"),
        Port("Bias", optional=True, doc="shape [C]"),
        Port("Residual", optional=True, doc="same shape as X; added before the norm"),
    ),
    outputs=(
        Port("Y"),
        Port("ResidualSum", optional=True, doc="X + Residual, when Residual is given"),
    ),
    attributes=(
        Attribute("groups", int, 32, "number of channel groups; divides C"),
        Attribute("activation", str, "identity", "applied to the normalized, scaled, shifted value"),
        Attribute("epsilon", float, 1e-5, "added to the variance before the square root"),
    ),
    reference=group_norm_act_reference,
)
