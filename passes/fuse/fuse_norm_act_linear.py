"""fuse_norm_act_linear: norm → activation → a narrow linear layer (→ bias → activation) as one kernel.

When the linear layer has few outputs (the seed: D → 1), the matmul moves almost no data of its own;
computing it in the norm kernel's epilogue, while the normalized row is still in registers, saves a
full write and read of the activation tensor and two launches. Wider layers stay with the matmul
library: ``MAX_OUT_FEATURES`` is the width up to which the fused kernel wins, per storage dtype
(measured by bench/bench_kernels.py on an H100, rows=16384, D=256: bench/results/kernels.md; float32
fused beats norm kernel + cuBLAS through K=16 and loses at K=64; bfloat16 wins at K=4, loses at K=16).
"""

from __future__ import annotations

import inspect

import numpy as np

from graphopt.ir import DType, Node, Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .activations import ACTIVATION_OPS, activation_of

MAX_OUT_FEATURES = {DType.FLOAT32: 32, DType.FLOAT16: 4, DType.BFLOAT16: 4}


def linear_pattern(h, w):
    return op.linear(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w, ...)


def matmul_bias_pattern(h, w, c):
    return op.add(op.matmul(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w).named("matmul"), c)


def matmul_pattern(h, w):
    return op.matmul(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w)


def _with_activation(inner):
    def pattern(h, w, *rest):
        return op.any_of(*ACTIVATION_OPS)(inner(h, w, *rest).named("linear"))

    pattern.__signature__ = inspect.signature(inner)  # the matcher names variables after parameters
    return pattern


def _check(match, linear: Node):
    norm_act = match.node("norm_act")
    x = norm_act.input(0)
    if norm_act.input(3) is not None:
        return Fail(f"{norm_act.name!r} also adds a residual")
    if x.rank is None or norm_act.attrs["axis"] != x.rank - 1:
        return Fail(f"{norm_act.name!r} normalizes more than the last dim")
    weight = constant_of(match["w"])
    if weight is None:
        return Fail(f"weight {match['w'].name!r} is computed at run time")
    array = weight.numpy()
    if array.ndim != 2 or match["w"].dtype != x.dtype:
        return Fail(f"weight {match['w'].name!r} is not a {x.dtype} matrix")
    # linear keeps weights as [K, D]; matmul multiplies by [D, K]
    weight_kd = array if linear.op == Op.LINEAR else array.T
    if weight_kd.shape[1] != x.shape[-1]:
        return Fail(f"weight {match['w'].name!r} does not match the normalized dim {x.shape[-1]}")
    limit = MAX_OUT_FEATURES.get(x.dtype, 0)
    if weight_kd.shape[0] > limit:
        return Fail(
            f"{weight_kd.shape[0]} output features; above {limit} ({x.dtype}) the matmul library is faster"
        )
    bias = _bias(match, linear, weight_kd.shape[0], x.rank)
    if isinstance(bias, Fail):
        return bias
    return match.with_info(weight=np.ascontiguousarray(weight_kd), bias=bias)


def _bias(match, linear: Node, out_features: int, rank: int):
    """The bias as one value per output feature, if it broadcasts so without adding dims to the
    output (which has ``rank`` dims, as the norm's input)."""
    if linear.op == Op.LINEAR:
        value = linear.input(2)
    elif linear.op == Op.ADD:
        value = match["c"]
    else:
        return None
    if value is None:
        return None
    tensor = constant_of(value)
    if tensor is None:
        return Fail(f"bias {value.name!r} is computed at run time")
    array = tensor.numpy()
    if array.size != out_features or (array.ndim and array.shape[-1] != out_features):
        return Fail(f"bias {value.name!r} of shape {list(array.shape)} is not one value per output feature")
    if array.ndim > rank:
        return Fail(f"bias {value.name!r} of shape {list(array.shape)} adds dims to the {rank}-dim output")
    return array.reshape(out_features)


def check_plain(match):
    return _check(match, match.root)


def check_activated(match):
    return _check(match, match.node("linear"))


def _replace(b, match, out_activation: str):
    norm_act = match.node("norm_act")
    weight = b.constant(match.info["weight"], f"{norm_act.name}_linear_weight", derived_from=[match["w"]])
    bias = match.info["bias"]
    bias_value = (
        None
        if bias is None
        else b.constant(
            bias.astype(match.info["weight"].dtype),
            f"{norm_act.name}_linear_bias",
            derived_from=[_bias_source(match)],
        )
    )
    return b.norm_act_linear(
        norm_act.input(0),
        norm_act.input(1),
        norm_act.input(2),
        weight,
        bias_value,
        norm=norm_act.attrs["norm"],
        activation=norm_act.attrs["activation"],
        eps=norm_act.attrs["eps"],
        out_activation=out_activation,
    )


def _bias_source(match):
    if "c" in match.values:
        return match["c"]
    return next((n.input(2) for n in match.matched if n.op == Op.LINEAR), None)


def replace_plain(b, match):
    return _replace(b, match, "identity")


def replace_activated(b, match):
    return _replace(b, match, activation_of(match.root).attr)


_FORMS = (("linear", linear_pattern), ("matmul_bias", matmul_bias_pattern), ("matmul", matmul_pattern))

PASS = rewrite_pass(
    "fuse_norm_act_linear",
    "Fuse NormAct + a narrow linear layer (few outputs; + bias, activation) into one kernel.",
    [
        *(
            Rule(f"fuse_norm_act_{name}_act", _with_activation(p), replace_activated, check_activated)
            for name, p in _FORMS
        ),
        *(Rule(f"fuse_norm_act_{name}", p, replace_plain, check_plain) for name, p in _FORMS),
    ],
)
