"""GroupNormAct: Y = activation(group_norm(X [+ Residual]) * Scale + Bias), and the residual sum.

Group norm splits the C channels of an [N, C, *] tensor into ``groups`` groups of C / groups
consecutive channels and normalizes each (sample, group) over its channels and spatial positions,
then scales and shifts per channel (torch's ``nn.GroupNorm``, ONNX ``GroupNormalization`` since
opset 21). The statistics are float32 whatever the storage type.
"""

from __future__ import annotations

from graphopt.fused.spec import Activation, Attribute, FusedOp, Port, TorchForm, activation_reference


def group_norm_reference(x, groups: int, scale, bias, eps: float):
    """Float64 group norm of ``x`` ([N, C, *]) with per-channel ``scale`` and ``bias``."""
    import numpy as np

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


def reference(x, scale=None, bias=None, residual=None, *, groups, activation, epsilon):
    """Float64 (y, residual_sum); residual_sum is None when no residual is given."""
    import numpy as np

    s = np.asarray(x, dtype=np.float64)
    if residual is not None:
        s = s + np.asarray(residual, dtype=np.float64)
    normalized = group_norm_reference(s, groups, scale, bias, epsilon)
    y = activation_reference(Activation.parse(activation), normalized)
    return y, (s if residual is not None else None)


def _shapes(present, shapes):
    """Y and ResidualSum (with a Residual) have X's shape."""
    return [shapes[0]] * (2 if present[3] else 1)


def _describe(attrs, present) -> list[str]:
    return [f"{attrs.get('groups', '')} groups", str(attrs.get("activation", ""))] + (
        ["+residual"] if present[3] else []
    )


GROUP_NORM_ACT = FusedOp(
    name="GroupNormAct",
    ir_name="group_norm_act",
    package=__package__,
    doc=(
        "Y = activation(group_norm(X [+ Residual]) * Scale + Bias) on X of shape [N, C, *]: each "
        "(sample, group of C / groups consecutive channels) normalized with float32 statistics, then "
        "scaled and shifted per channel. With Residual, the second output is X + Residual."
    ),
    inputs=(
        Port("X", doc="shape [N, C, *], C a multiple of groups"),
        Port("Scale", optional=True, doc="shape [C]", torch="weight"),
        Port("Bias", optional=True, doc="shape [C]"),
        Port("Residual", optional=True, doc="same shape as X; added before the norm"),
    ),
    outputs=(
        Port("Y"),
        Port("ResidualSum", optional=True, doc="X + Residual, when Residual is given", needs="Residual"),
    ),
    attributes=(
        # (no default in ONNX's GroupNormalization; 32 is what diffusion models use)
        Attribute("groups", int, 32, "number of channel groups; divides C", tag="groups{}"),
        Attribute("activation", Activation, "identity", "applied to the normalized, scaled, shifted value"),
        Attribute(
            "epsilon",
            float,
            1e-5,
            "added to the variance before the square root",
            key="eps",
            tag="eps{}",
            minimum=0.0,
        ),
    ),
    torch_forms=(
        TorchForm("group_norm_act", ("X", "Scale", "Bias"), ("Y",)),
        TorchForm(
            "add_group_norm_act",
            ("X", "Residual", "Scale", "Bias"),
            ("Y", "ResidualSum"),
            frozenset({"Residual"}),
        ),
    ),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
