"""NormAct: Y = activation(norm(X [+ Residual]) * Scale + Bias), and the residual sum."""

from __future__ import annotations

from graphopt.fused.spec import (
    Activation,
    Attribute,
    FusedOp,
    Norm,
    Port,
    TorchForm,
    activation_reference,
    norm_reference,
)


def reference(x, scale=None, bias=None, residual=None, *, norm, activation, epsilon, axis):
    """Float64 (y, residual_sum); residual_sum is None when no residual is given."""
    import numpy as np

    norm, activation = Norm.parse(norm), Activation.parse(activation)
    s = np.asarray(x, dtype=np.float64)
    if residual is not None:
        s = s + np.asarray(residual, dtype=np.float64)
    y = activation_reference(activation, norm_reference(norm, s, scale, bias, epsilon, axis))
    return y, (s if residual is not None else None)


def _shapes(present, shapes):
    """Y and ResidualSum (with a Residual) have X's shape."""
    return [shapes[0]] * (2 if present[3] else 1)


def _describe(attrs, present) -> list[str]:
    return [str(attrs.get("norm", "")), str(attrs.get("activation", ""))] + (
        ["+residual"] if present[3] else []
    )


# Shared by NormActLinear, which normalizes the same way.
NORM_ATTRIBUTES = (
    Attribute("norm", Norm, "layer", "'layer' (mean and variance) or 'rms' (root mean square)"),
    Attribute("activation", Activation, "identity", "applied to the normalized, scaled, shifted value"),
    Attribute(
        "epsilon", float, 1e-5, "added to the variance (or mean square) before the square root",
        key="eps", tag="eps{}", minimum=0.0,
    ),
)  # fmt: skip

NORM_ACT = FusedOp(
    name="NormAct",
    ir_name="norm_act",
    package=__package__,
    doc=(
        "Y = activation(norm(X [+ Residual]) * Scale + Bias), normalizing over dimensions [axis, rank) "
        "with float32 statistics. With Residual, the second output is X + Residual."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc="shape X.shape[axis:]", torch="weight"),
        Port("Bias", optional=True, doc="shape X.shape[axis:]; layer norm only"),
        Port("Residual", optional=True, doc="same shape as X; added before the norm"),
    ),
    outputs=(
        Port("Y"),
        Port("ResidualSum", optional=True, doc="X + Residual, when Residual is given", needs="Residual"),
    ),
    attributes=(*NORM_ATTRIBUTES, Attribute("axis", int, -1, "first normalized dimension", tag="axis{}")),
    torch_forms=(
        TorchForm("norm_act", ("X", "Scale", "Bias"), ("Y",)),
        TorchForm(
            "add_norm_act", ("X", "Residual", "Scale", "Bias"), ("Y", "ResidualSum"), frozenset({"Residual"})
        ),
    ),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
