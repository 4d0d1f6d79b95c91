"""graphopt's own fused ops (``torch.ops.graphopt.*``) back to their canonical ops, so a program that
graphopt already optimized reads as the same IR that produced it."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Op
from .aten_members import Member, one


def _norm_act(node, a):
    attrs = {k: a[k] for k in ("norm", "activation", "eps", "axis")}
    return one(Op.NORM_ACT, [a["x"], a["weight"], a["bias"]], **attrs)


def _add_norm_act(node, a):
    attrs = {k: a[k] for k in ("norm", "activation", "eps", "axis")}
    return [Member(Op.NORM_ACT, [a["x"], a["weight"], a["bias"], a["residual"]], attrs, results=[0, 1])]


def _norm_act_linear(node, a):
    attrs = {k: a[k] for k in ("norm", "activation", "eps", "out_activation")}
    inputs = [a[k] for k in ("x", "weight", "bias", "linear_weight", "linear_bias")]
    return one(Op.NORM_ACT_LINEAR, inputs, **attrs)


def _group_norm_act(node, a):
    attrs = {"groups": a["groups"], "activation": a["activation"], "eps": a["eps"]}
    return one(Op.GROUP_NORM_ACT, [a["x"], a["weight"], a["bias"]], **attrs)


def _add_group_norm_act(node, a):
    attrs = {"groups": a["groups"], "activation": a["activation"], "eps": a["eps"]}
    return [Member(Op.GROUP_NORM_ACT, [a["x"], a["weight"], a["bias"], a["residual"]], attrs, results=[0, 1])]


FUSED: dict[str, Callable] = {
    "norm_act": _norm_act,
    "add_norm_act": _add_norm_act,
    "norm_act_linear": _norm_act_linear,
    "group_norm_act": _group_norm_act,
    "add_group_norm_act": _add_group_norm_act,
}
