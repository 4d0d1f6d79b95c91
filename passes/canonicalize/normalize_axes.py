"""normalize_axes: every axis attribute becomes non-negative (and axes lists sorted), so rules compare
axes directly instead of reasoning about ``-1`` versus ``rank - 1``."""

from __future__ import annotations

from graphopt.ir import Op, normalize_axis
from graphopt.rewrite import InPlace, Rule, op, rewrite_pass

# op -> (attribute, how many dims the attribute counts beyond the first input's rank)
_AXIS_ATTRS = {
    Op.CONCAT: ("axis", 0),
    Op.GATHER: ("axis", 0),
    Op.SPLIT: ("axis", 0),
    Op.STACK: ("axis", 1),
    Op.LAYER_NORM: ("axis", 0),
    Op.RMS_NORM: ("axis", 0),
    Op.NORM_ACT: ("axis", 0),
    Op.SQUEEZE: ("axes", 0),
    Op.REDUCE_MEAN: ("axes", 0),
    Op.UNSQUEEZE: ("axes", None),  # counts the output's rank: the input's plus the new axes
}

# Ops whose extra inputs are tensor-valued attributes in a frontend's raw form.
_RAW_WHEN_MORE_INPUTS = {Op.SPLIT, Op.SQUEEZE, Op.UNSQUEEZE, Op.REDUCE_MEAN}


def pattern(x):
    return op.any_of(*_AXIS_ATTRS)(x, ...)


def check(match):
    node, x = match.root, match["x"]
    attr, extra = _AXIS_ATTRS[node.op]
    if attr not in node.attrs or x.rank is None:
        return None
    if node.op in _RAW_WHEN_MORE_INPUTS and len(node.inputs) > 1:
        return None  # still in a frontend's raw form; fold_shape_inputs handles it first
    if node.op == Op.SPLIT and "sizes" not in node.attrs:
        return None  # sizes unknown until run time (a symbolic dim): the node stays as it was read
    current = node.attrs[attr]
    if attr == "axis":
        fixed = normalize_axis(current, x.rank + extra)
    else:
        rank = x.rank + (len(current) if extra is None else extra)
        fixed = tuple(sorted(normalize_axis(a, rank) for a in current))
    if fixed == current:
        return None
    return match.with_info(attrs={**node.attrs, attr: fixed})


def replace(b, match):
    return InPlace(match.info["attrs"])


PASS = rewrite_pass(
    "normalize_axes",
    "Make axis attributes non-negative and axes lists sorted.",
    [Rule("normalize_axes", pattern, replace, check)],
)
