"""fuse_norm_act_per_slice: norm → Mul(scale) → Add(bias) → activation with constant scale and bias
that vary along leading dims (one row per feature, [N, 1, D] on [N, B, D]) becomes one
``graphopt.NormAct`` reading them row by row (``graphopt.fused.broadcast_rows``).

Horizontal batching writes this chain for per-feature norms: each feature's own LayerNorm becomes
one norm of the stacked slices, whose stacked weights cannot sit inside it.
"""

from __future__ import annotations

from graphopt.fused.broadcast_rows import broadcast_block
from graphopt.ir import Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .activations import ACTIVATION_OPS, activation_of
from .fuse_norm_act import NORM_KINDS, NORMS, check_norm, unless_constant


def _norm(x):
    return op.any_of(*NORMS)(x, ...).named("norm")


def scale_bias_pattern(x, s, c):
    return op.any_of(*ACTIVATION_OPS)(op.add(op.mul(_norm(x), s).named("mul"), c).named("add"))


def scale_pattern(x, s):
    return op.any_of(*ACTIVATION_OPS)(op.mul(_norm(x), s).named("mul"))


def bias_pattern(x, c):
    return op.any_of(*ACTIVATION_OPS)(op.add(_norm(x), c).named("add"))


def _operand(match, name: str, what: str) -> Fail | None:
    """Why the fused op cannot read ``match[name]`` as its per-row ``what``."""
    norm = match.node("norm")
    x, value = norm.input(0), match[name]
    if constant_of(value) is None:
        return Fail(f"{what} {value.name!r} is computed at run time")
    if value.dtype != x.dtype:
        return Fail(f"{what} {value.name!r} is {value.dtype}, the input {x.dtype}")
    if x.shape is None or value.shape is None:
        return Fail(f"shape of {what} {value.name!r} or of {x.name!r} is unknown")
    block = broadcast_block(value.shape, x.shape, norm.attrs["axis"])
    if isinstance(block, str):
        return Fail(f"{what} {value.name!r} cannot be read row by row: {block}")
    return None


def check(match):
    norm = match.node("norm")
    failure = check_norm(norm)
    if failure:
        return failure
    has_mul, has_add = "mul" in match.nodes, "add" in match.nodes
    own_scale, own_bias = _own_weights(norm)
    # The norm's own weights come first: a Mul after a norm with weights, or an Add after one with
    # a bias, would need them combined into new constants.
    if (has_mul and (own_scale or own_bias)) or (has_add and own_bias):
        return Fail(f"{norm.name!r} has weights of its own before the {'Mul' if has_mul else 'Add'}")
    if has_add and norm.op != Op.LAYER_NORM:
        return Fail(f"{norm.name!r} is an RMS norm; the fused op adds a bias after layer norms only")
    for name, what in (("s", "scale"), ("c", "bias")):
        if name in match.values:
            failure = _operand(match, name, what)
            if failure:
                return failure
    return match


def _own_weights(norm):
    """The norm's scale and bias, None where absent or all ones and zeros (exporters write those
    for a norm without weights)."""
    scale, bias = ([*norm.inputs[1:], None, None])[:2]
    return unless_constant(scale, 1.0), unless_constant(bias, 0.0)


def replace(b, match):
    norm = match.node("norm")
    scale = match.values.get("s", _own_weights(norm)[0])
    return b.node(
        Op.NORM_ACT,
        norm.input(0),
        scale,
        match.values.get("c"),
        None,
        norm=NORM_KINDS[norm.op].attr,
        activation=activation_of(match.root).attr,
        eps=float(norm.attrs["eps"]),
        axis=norm.attrs["axis"],
    ).outputs[0]


PASS = rewrite_pass(
    "fuse_norm_act_per_slice",
    "Fuse norm → Mul → Add → activation with constant, per-slice scale and bias into graphopt.NormAct.",
    [
        Rule("fuse_norm_scale_bias_act", scale_bias_pattern, replace, check),
        Rule("fuse_norm_scale_act", scale_pattern, replace, check),
        Rule("fuse_norm_bias_act", bias_pattern, replace, check),
    ],
)
