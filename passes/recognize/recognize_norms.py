"""recognize_norms: layer and RMS norms written out in elementwise ops become single norm ops.

Older exporters and converters write ``ReduceMean → Sub → Pow → ReduceMean → Add → Sqrt → Div`` (or
with ``Mul(d, d)``, ``Reciprocal(Sqrt)``, ``Rsqrt``); decomposed torch programs use ``var_mean`` and
``rsqrt``. The scale and bias that follow (``* w + b``) are folded in afterwards, so every spelling
ends as one ``layer_norm``/``rms_norm``. The Casts that mixed-precision exports wrap around a norm stay:
the norm is computed in float32 unless it lands in a fused op (``fuse_norm_act``).
"""

from __future__ import annotations

import numpy as np

from graphopt.ir import Op, constant_of
from graphopt.rewrite import Either, Fail, Rule, op, rewrite_pass, why_kept
from graphopt.rewrite.scalars import scalar_operand

from .origin import note_origin


def _inverse_sqrt(numerator, denominator):
    return Either(
        "inverse",
        div=op.div(numerator, op.sqrt(denominator)),
        rsqrt=op.mul(numerator, op.rsqrt(denominator)),
        reciprocal=op.mul(numerator, op.reciprocal(op.sqrt(denominator))),
        one_over=op.mul(numerator, op.div(1.0, op.sqrt(denominator))),
    )


def _square(value):
    return Either("square", pow=op.pow(value, 2.0), mul=op.mul(value, value))


def layer_norm_pattern(x, eps):
    centered = op.sub(x, op.reduce_mean(x).named("mean"))
    variance = op.reduce_mean(_square(centered)).named("var")
    return _inverse_sqrt(centered, op.add(variance, eps).named("shifted"))


def rms_norm_pattern(x, eps):
    mean_square = op.reduce_mean(_square(x)).named("var")
    return _inverse_sqrt(x, op.add(mean_square, eps).named("shifted"))


def var_mean_pattern(x, eps):
    variance = op.var_mean(x).output(0).named("var")
    centered = op.sub(x, op.var_mean(x).output(1).named("mean"))
    return op.mul(centered, op.rsqrt(op.add(variance, eps).named("shifted")))


def _trailing_axis(match, reduce_names) -> int | Fail:
    """The first normalized axis, if every reduction is over the trailing dims with keepdims."""
    x = match["x"]
    if x.rank is None:
        return Fail(f"rank of {x.name!r} is unknown")
    axes = None
    for name in reduce_names:
        node = match.node(name)
        if len(node.inputs) != 1 or not node.attrs.get("keepdims", False) or "axes" not in node.attrs:
            return Fail(f"{node.op} {node.name!r} does not keep dims or has run-time axes")
        found = tuple(sorted(a % x.rank for a in node.attrs["axes"]))
        if axes is not None and found != axes:
            return Fail(f"reductions disagree on axes: {axes} and {found}")
        axes = found
    if axes != tuple(range(axes[0], x.rank)):
        return Fail(f"normalized axes {axes} are not the trailing dims of {x.name!r}")
    return axes[0]


def _private(match) -> Fail | None:
    """Why the norm's intermediates cannot go, or None. The statistics (the mean, the centered value,
    the square and its mean) may have other readers: two norms of one tensor with different epsilons
    share them once common subexpressions are merged, and each norm is still recognized, the
    statistics staying computed until the last one is."""
    var = match.node("var")
    square = var.input(0).producer
    centered = square.input(0).producer if square is not None else None  # (x - mean; x's producer in RMS)
    reason = why_kept(
        match.root.graph, match.inner_values(var, square, centered, match.nodes.get("mean")), match.matched
    )
    return Fail(reason) if reason else None


def _check(match, reduce_names):
    x = match["x"]
    if x.dtype is None or not x.dtype.is_float:
        return None
    private = _private(match)
    if private is not None:
        return private
    if "mean" in match.nodes and "var" in match.nodes and match.node("var").op == Op.VAR_MEAN:
        if match.node("mean") is not match.node("var"):
            return None
        if match.node("var").attrs.get("correction", 1) != 0:
            return Fail("var_mean uses a corrected (unbiased) variance")
    eps = scalar_operand(match["eps"], match.node("shifted"))
    if eps is None:
        tensor = constant_of(match["eps"])
        if tensor is None:
            return Fail(f"epsilon {match['eps'].name!r} is computed at run time")
        return Fail(f"epsilon {match['eps'].name!r} of shape {list(tensor.shape)} is no scalar there")
    if not 0 <= eps < float("inf"):  # (also refuses NaN: a norm op's epsilon must be a number)
        return Fail(f"epsilon {match['eps'].name!r} is {eps}, not a finite non-negative number")
    if float(np.float32(eps)) != eps:
        # A float64 program's own epsilon (1e-5 as a double): the norm ops' epsilon is a float32
        # attribute in ONNX (LayerNormalization's, the fused ops'), which would round it, and the
        # normalized rows of a near-constant row would move by as much as that rounding.
        return Fail(f"epsilon {match['eps'].name!r} = {eps!r} is not a float32 number")
    axis = _trailing_axis(match, reduce_names)
    if isinstance(axis, Fail):
        return axis
    return match.with_info(axis=axis, eps=float(eps))


def check_layer_norm(match):
    names = ["var"] if match.node("var").op == Op.VAR_MEAN else ["mean", "var"]
    return _check(match, names)


def check_rms_norm(match):
    return _check(match, ["var"])


def replace_layer_norm(b, match):
    return b.layer_norm(match["x"], axis=match.info["axis"], eps=match.info["eps"])


def replace_rms_norm(b, match):
    return b.rms_norm(match["x"], axis=match.info["axis"], eps=match.info["eps"])


# Folding the affine part and the casts into a norm.


def scale_pattern(x, w):
    return op.mul(op.any_of(Op.LAYER_NORM, Op.RMS_NORM)(x).named("norm"), w)


def rounded_scale_pattern(x, w):
    return op.mul(op.cast(op.any_of(Op.LAYER_NORM, Op.RMS_NORM)(x).named("norm")).named("down"), w)


def check_rounded_scale(match):
    """A scale applied after the norm's result is rounded to a narrower type (LLaMA's
    ``weight * hidden.to(input_dtype)``) stays out: folded in, it would multiply before the rounding,
    and the result would differ from the model's in the last bit."""
    down, weight = match.node("down"), match["w"]
    narrow = down.output.dtype
    if match["x"].dtype == narrow or weight.dtype != narrow:
        return None
    return Fail(
        f"scale {weight.name!r} multiplies in {narrow} after {down.output.name!r} rounds the norm's "
        f"{match['x'].dtype} result; folded into the norm it would multiply before rounding"
    )


def bias_pattern(x, w, c):
    return op.add(op.layer_norm(x, w).named("norm"), c)


def unscaled_bias_pattern(x, c):
    return op.add(op.layer_norm(x).named("norm"), c)


def _normalized_constant(match, name: str):
    norm, weight = match.node("norm"), match[name]
    tensor = constant_of(weight)
    x = match["x"]
    if tensor is None:
        return Fail(f"{weight.name!r} is computed at run time")
    normalized = tuple(x.shape[norm.attrs["axis"] :]) if x.shape is not None else None
    if normalized is None or not all(isinstance(d, int) for d in normalized):
        return Fail(f"normalized dims of {x.name!r} are not static")
    shape = tuple(tensor.shape)
    if len(shape) > x.rank:  # (its leading 1s would add dims to the norm's output)
        return Fail(f"{weight.name!r} ({list(shape)}) has more dims than {x.name!r} ({x.rank})")
    while len(shape) > len(normalized) and shape[0] == 1:
        shape = shape[1:]
    if shape != normalized or weight.dtype != x.dtype:
        return Fail(
            f"{weight.name!r} ({weight.dtype}{list(tensor.shape)}) is not one value per normalized element"
        )
    return tensor.numpy().reshape(normalized)


def check_scale(match):
    array = _normalized_constant(match, "w")
    return array if isinstance(array, Fail) else match.with_info(array=array)


def replace_scale(b, match):
    norm = match.node("norm")
    weight = b.constant(match.info["array"], f"{norm.name}_scale", derived_from=[match["w"]])
    return b.node(norm.op, match["x"], weight, **norm.attrs).output


def check_bias(match):
    array = _normalized_constant(match, "c")
    return array if isinstance(array, Fail) else match.with_info(array=array)


def replace_bias(b, match):
    norm = match.node("norm")
    bias = b.constant(match.info["array"], f"{norm.name}_bias", derived_from=[match["c"]])
    # A norm without a scale gets ones: the bias is the third input.
    scale = match.values.get("w") or b.constant(
        np.ones_like(match.info["array"]), f"{norm.name}_scale", derived_from=()
    )
    return b.layer_norm(match["x"], scale, bias, **norm.attrs)


PASS = rewrite_pass(
    "recognize_norms",
    "Turn elementwise spellings of layer norm and RMS norm (with their scale and bias) into norm ops.",
    [
        Rule(
            "layer_norm_from_ops[{square},{inverse}]",
            layer_norm_pattern,
            replace_layer_norm,
            check_layer_norm,
            allow_external_uses=True,  # (check_layer_norm allows them for the statistics only)
        ),
        Rule(
            "layer_norm_from_var_mean",
            var_mean_pattern,
            replace_layer_norm,
            check_layer_norm,
            allow_external_uses=True,
        ),
        Rule(
            "rms_norm_from_ops[{square},{inverse}]",
            rms_norm_pattern,
            replace_rms_norm,
            check_rms_norm,
            allow_external_uses=True,
        ),
        Rule("fold_norm_scale", scale_pattern, replace_scale, check_scale),
        Rule("fold_norm_scale_after_cast", rounded_scale_pattern, replace_scale, check_rounded_scale),
        Rule("fold_norm_bias", bias_pattern, replace_bias, check_bias),
        Rule("fold_norm_bias_unscaled", unscaled_bias_pattern, replace_bias, check_bias),
    ],
    on_rewrite=note_origin,
)
