"""fuse_norm_act_per_slice: norm → Mul(scale) → Add(bias) → activation with a scale and bias that vary
along leading dims (one row per feature, [N, 1, D] on [N, B, D]) becomes one ``graphopt.NormAct``
reading them row by row (``graphopt.fused.broadcast_rows``).

Horizontal batching writes this chain for per-feature norms, with constant operands: each feature's
own LayerNorm becomes one norm of the stacked slices, whose stacked weights cannot sit inside it.
Diffusion transformers write it with computed ones and no activation: adaptive layer norm (DiT, PixArt,
SD3, Flux) modulates a weightless LayerNorm by a scale and shift computed from the timestep,
``norm(x) * (1 + scale[:, None]) + shift[:, None]``, one row per sample; fused, that is one pass over
x instead of three. A computed operand must be per slice (one row per slice of X, not a row per row:
that is a residual's or a gate's form, for other rules).
"""

from __future__ import annotations

from graphopt.fused import Activation
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


def modulation_pattern(x, s, c):
    return op.add(op.mul(_norm(x), s).named("mul"), c).named("add")


def modulation_scale_pattern(x, s):
    return op.mul(_norm(x), s).named("mul")


def fused_modulation_pattern(x, s, c):
    return op.add(op.mul(op.any_of(Op.NORM_ACT)(x, ...).named("norm"), s).named("mul"), c).named("add")


def _operand(match, name: str, what: str) -> Fail | None:
    """Why the fused op cannot read ``match[name]`` as its per-row ``what``."""
    norm = match.node("norm")
    x, value = norm.input(0), match[name]
    if value.dtype != x.dtype:
        return Fail(f"{what} {value.name!r} is {value.dtype}, the input {x.dtype}")
    if x.shape is None or value.shape is None:
        return Fail(f"shape of {what} {value.name!r} or of {x.name!r} is unknown")
    block = broadcast_block(value.shape, x.shape, norm.attrs["axis"])
    if isinstance(block, str):
        return Fail(f"{what} {value.name!r} cannot be read row by row: {block}")
    if constant_of(value) is None:
        return _computed_operand(norm, value, block, what)
    return None


def _computed_operand(norm, value, block, what: str) -> Fail | None:
    axis = norm.attrs["axis"] % norm.input(0).rank
    if block is not None and block[1] == axis - 1:
        return Fail(f"{what} {value.name!r} varies along the rows of its slice: not per slice")
    # (it cannot be computed from the norm's output: that output has the Mul or Add as its one reader)
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
    return _operands(match) or match


def _operands(match) -> Fail | None:
    """Why the fused op cannot read the matched scale or bias, if it cannot."""
    for name, what in (("s", "scale"), ("c", "bias")):
        if name in match.values:
            failure = _operand(match, name, what)
            if failure:
                return failure
    return None


def check_modulation(match):
    """The forms without an activation: only where no activation follows (its rule takes the chain)."""
    readers = match.root.output.users()
    if len(readers) == 1 and readers[0].op in ACTIVATION_OPS:
        return None
    return check(match)


def check_fused_modulation(match):
    """A modulation after a norm that ``fuse_add_norm`` fused with its residual (DiT, PixArt: each
    modulated norm reads the residual stream): the scale and shift join that NormAct."""
    fused = match.node("norm")
    if fused.attrs["activation"] != Activation.IDENTITY.attr or fused.input(1) or fused.input(2):
        return None  # (an activation or weights of its own come before the Mul)
    normalized = fused.outputs[0]
    if normalized.users() != [match.node("mul")] or fused.graph.is_output(normalized):
        return Fail(f"{normalized.name!r} is also read elsewhere")
    if fused.attrs["norm"] != "layer":
        return Fail(f"{fused.name!r} is an RMS norm; the fused op adds a bias after layer norms only")
    return _operands(match) or match


def replace_fused_modulation(b, match):
    fused = match.node("norm")
    residual = fused.input(3) if len(fused.inputs) > 3 else None
    node = b.node(
        Op.NORM_ACT,
        fused.input(0),
        match["s"],
        match["c"],
        residual,
        norm=fused.attrs["norm"],
        activation=Activation.IDENTITY.attr,
        eps=fused.attrs["eps"],
        axis=fused.attrs["axis"],
    )
    replaced = {match.root.output: node.outputs[0]}
    if residual is not None:
        replaced[fused.outputs[1]] = node.outputs[1]
    return replaced


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
        activation=(
            activation_of(match.root) if match.root.op in ACTIVATION_OPS else Activation.IDENTITY
        ).attr,
        eps=float(norm.attrs["eps"]),
        axis=norm.attrs["axis"],
    ).outputs[0]


PASS = rewrite_pass(
    "fuse_norm_act_per_slice",
    "Fuse norm → Mul → Add (→ activation) with a per-slice scale and bias (constant, or computed "
    "before the norm: adaptive layer norm) into graphopt.NormAct.",
    [
        Rule("fuse_norm_scale_bias_act", scale_bias_pattern, replace, check),
        Rule("fuse_norm_scale_act", scale_pattern, replace, check),
        Rule("fuse_norm_bias_act", bias_pattern, replace, check),
        Rule("fuse_norm_modulation", modulation_pattern, replace, check_modulation),
        Rule("fuse_norm_modulation[scale]", modulation_scale_pattern, replace, check_modulation),
        Rule(
            "fuse_norm_modulation[after_residual]",
            fused_modulation_pattern,
            replace_fused_modulation,
            check_fused_modulation,
            allow_external_uses=True,
        ),
    ],
)
