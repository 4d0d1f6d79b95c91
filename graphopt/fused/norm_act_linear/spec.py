"""NormActLinear: a norm and activation over the last dimension, then a narrow linear layer."""

from __future__ import annotations

from graphopt.fused.norm_act.spec import NORM_ATTRIBUTES
from graphopt.fused.norm_act.spec import reference as norm_act_reference
from graphopt.fused.spec import Activation, Attribute, FusedOp, Port, TorchForm, activation_reference


def reference(x, scale, bias, weight, linear_bias, *, norm, activation, epsilon, out_activation):
    """y = out_act(act(norm(x)) @ weight.T + linear_bias); weight is [K, D] (nn.Linear's layout)."""
    import numpy as np

    hidden, _ = norm_act_reference(x, scale, bias, norm=norm, activation=activation, epsilon=epsilon, axis=-1)
    y = hidden @ np.asarray(weight, dtype=np.float64).T
    if linear_bias is not None:
        y = y + np.asarray(linear_bias, dtype=np.float64)
    return activation_reference(Activation.parse(out_activation), y)


def _shapes(present, shapes):
    """Y is X.shape[:-1] + [Weight.shape[0]]."""
    x, weight = shapes[0], shapes[3]
    if x is None or not x:
        return [None]
    return [(*x[:-1], weight[0] if weight is not None and len(weight) == 2 else None)]


def _describe(attrs, present) -> list[str]:
    out = attrs.get("out_activation", "identity")
    return [str(attrs.get("norm", "")), str(attrs.get("activation", "")), f"→ linear·{out}"]


NORM_ACT_LINEAR = FusedOp(
    name="NormActLinear",
    ir_name="norm_act_linear",
    package=__package__,
    doc=(
        "Y = out_activation(activation(norm(X) * Scale + Bias) @ Weight^T + LinearBias): a norm and "
        "activation over the last dimension D followed by a narrow linear layer (Weight is [K, D]), "
        "reading each row of X once."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc="shape [D]", torch="weight"),
        Port("Bias", optional=True, doc="shape [D]; layer norm only"),
        Port("Weight", doc="shape [K, D]", torch="linear_weight"),
        Port("LinearBias", optional=True, doc="shape [K]", torch="linear_bias"),
    ),
    outputs=(Port("Y", doc="shape X.shape[:-1] + [K]"),),
    attributes=(
        *NORM_ATTRIBUTES,
        Attribute("out_activation", Activation, "identity", "applied after the linear layer", tag="out-{}"),
    ),
    torch_forms=(TorchForm("norm_act_linear", ("X", "Scale", "Bias", "Weight", "LinearBias"), ("Y",)),),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
