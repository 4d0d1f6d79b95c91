"""NormActLinear: a norm and activation over the last dimension, then a narrow linear layer."""

from __future__ import annotations

from graphopt.fused.broadcast_rows import RowBroadcast, row_broadcast
from graphopt.fused.norm_act.spec import NORM_ATTRIBUTES
from graphopt.fused.norm_act.spec import reference as norm_act_reference
from graphopt.fused.spec import Activation, Attribute, FusedOp, Port, TorchForm, activation_reference


def weight_rows(weight, x) -> RowBroadcast | str:
    """How X's rows read a ``[*G, K, D]`` weight: row r multiplies by matrix ``(r // inner) % groups``
    of the weight viewed as [groups, K, D] (``graphopt.fused.broadcast_rows``); or why it cannot
    (a sentence). ``[K, D]`` is one matrix for every row; ``G`` broadcasts over X's leading dims
    but its rows dim, as a batched matmul's batch dims do (per-feature Linear(D, K) weights
    [N, K, D] on X [N, B, D]), and must span one contiguous block of them."""
    weight, x = list(weight), list(x)
    if len(weight) < 2 or not x or weight[-1] != x[-1]:
        return f"shape {weight} is not [K, {x[-1] if x else 'D'}] nor [..., K, D] matrices over X's last dim"
    if len(weight) == 2:
        return RowBroadcast(1, 1)
    rows = row_broadcast((*weight[:-2], 1, weight[-1]), x, -1)
    if isinstance(rows, str):
        return f"leading dims {weight[:-2]} do not pick one matrix per block of X's rows {x[:-1]}"
    return rows


def reference(
    x, scale, bias, weight, linear_bias, residual=None, *, norm, activation, epsilon, out_activation
):
    """y = out_act(act(norm(x [+ residual])) @ weight^T + linear_bias); weight is [K, D]
    (nn.Linear's layout) or [*G, K, D] (one matrix per slice, multiplied as a batched matmul).
    Scale, bias, residual and linear bias may broadcast over rows as NormAct's operands do.
    The residual sum output is x + residual (NormAct's)."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    if isinstance(why := weight_rows(np.shape(weight), x.shape), str):
        raise ValueError(f"weight {why}")
    hidden, _ = norm_act_reference(
        x, scale, bias, residual, norm=norm, activation=activation, epsilon=epsilon, axis=-1
    )
    y = hidden @ np.swapaxes(np.asarray(weight, dtype=np.float64), -1, -2)
    if linear_bias is not None:
        if isinstance(why := row_broadcast(np.shape(linear_bias), y.shape, -1), str):
            raise ValueError(f"linear bias {why}")
        y = y + np.asarray(linear_bias, dtype=np.float64)
    return activation_reference(Activation.parse(out_activation), y)


def _shapes(present, shapes):
    """Y is X.shape[:-1] + [K] (K = Weight.shape[-2]); ResidualSum (with a Residual) is X's shape."""
    x, weight = shapes[0], shapes[3]
    residual_sum = [x] if len(present) > 5 and present[5] else []
    if x is None or not x:
        return [None, *residual_sum]
    k = weight[-2] if weight is not None and len(weight) >= 2 else None
    return [(*x[:-1], k), *residual_sum]


def _describe(attrs, present) -> list[str]:
    out = attrs.get("out_activation", "identity")
    words = [str(attrs.get("norm", "")), str(attrs.get("activation", "")), f"→ linear·{out}"]
    return words + (["+residual"] if len(present) > 5 and present[5] else [])


# Operands that broadcast over leading dims of X (graphopt.fused.broadcast_rows).
_PER_ROW = "(or broadcast over one contiguous block of X's leading dims, 1 on the others)"

NORM_ACT_LINEAR = FusedOp(
    name="NormActLinear",
    ir_name="norm_act_linear",
    package=__package__,
    doc=(
        "Y = out_activation(activation(norm(X [+ Residual]) * Scale + Bias) @ Weight^T + LinearBias): "
        "a norm and activation over the last dimension D followed by a narrow linear layer (Weight "
        "is [K, D], or one [K, D] matrix per slice of X's leading dims), reading each row of X once. "
        "With Residual, the second output is X + Residual."
    ),
    inputs=(
        Port("X"),
        Port("Scale", optional=True, doc=f"shape [D] {_PER_ROW}", torch="weight"),
        Port("Bias", optional=True, doc=f"shape [D] {_PER_ROW}; layer norm only"),
        Port(
            "Weight",
            doc="shape [K, D], or [*G, K, D]: matrices multiplied as a batched matmul's, G broadcast "
            "over X.shape[:-2] in one contiguous block of dims",
            torch="linear_weight",
        ),
        Port(
            "LinearBias",
            optional=True,
            doc="shape [K] (or broadcast over one block of Y's leading dims)",
            torch="linear_bias",
        ),
        Port("Residual", optional=True, doc=f"shape X.shape {_PER_ROW}; added before the norm"),
    ),
    outputs=(
        Port("Y", doc="shape X.shape[:-1] + [K]"),
        Port("ResidualSum", optional=True, doc="X + Residual, when Residual is given", needs="Residual"),
    ),
    attributes=(
        *NORM_ATTRIBUTES,
        Attribute("out_activation", Activation, "identity", "applied after the linear layer", tag="out-{}"),
    ),
    torch_forms=(
        TorchForm("norm_act_linear", ("X", "Scale", "Bias", "Weight", "LinearBias"), ("Y",)),
        TorchForm(
            "add_norm_act_linear",
            ("X", "Residual", "Scale", "Bias", "Weight", "LinearBias"),
            ("Y", "ResidualSum"),
            frozenset({"Residual"}),
        ),
    ),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
