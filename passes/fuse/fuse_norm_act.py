"""fuse_norm_act: layer/RMS norm followed by an activation becomes one ``graphopt.NormAct`` node.

Both ops are memory-bound; fused, each row is read once and written once. A residual add in front of
the norm (``x + r → norm → act``, the transformer pattern) folds in too, with the sum as a second
output for the layers that still read it; also where a view that keeps the normalized dims sits
between the add and the norm (OPT flattens the residual stream to rows before its MLP's norm): both
operands are viewed instead, and the fused op's sum is the viewed sum. A transpose between the norm and
the activation (a layer norm over channels written between transposes, as speech models' feature
extractors write it) moves after the fused op: the activation is elementwise, so it commutes with it.
"""

from __future__ import annotations

import numpy as np

from graphopt.fused import NORM_ACT, Activation, Norm
from graphopt.fused.broadcast_rows import broadcast_block
from graphopt.fused.onnx_decompose import MIN_OPSET as FALLBACK_MIN_OPSET
from graphopt.ir import DType, Node, Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass, why_kept

from .activations import ACTIVATION_OPS, activation_of

KERNEL_DTYPES = frozenset(DType[name.upper()] for name in NORM_ACT.dtypes)
_KERNEL_DTYPE_NAMES = ", ".join(NORM_ACT.dtypes[:-1]) + " and " + NORM_ACT.dtypes[-1]
NORM_KINDS = {  # the norm each canonical op computes
    Op.LAYER_NORM: Norm.LAYER,
    Op.RMS_NORM: Norm.RMS,
}


def check_norm(norm: Node) -> Fail | None:
    """Why the fused kernels cannot compute this norm, or None."""
    opset = norm.graph.meta.get("opset", {}).get("")
    if opset is not None and opset < FALLBACK_MIN_OPSET:
        # (an ONNX model keeps its opset: its fused op's fallback function could not be written)
        return Fail(f"the model imports opset {opset}; fused ops need opset {FALLBACK_MIN_OPSET} or newer")
    x = norm.input(0)
    if x.dtype not in KERNEL_DTYPES:
        return Fail(f"{x.name!r} is {x.dtype}; the fused kernels take {_KERNEL_DTYPE_NAMES}")
    if x.rank is None or "axis" not in norm.attrs:
        return Fail(f"rank of {x.name!r} is unknown")
    if not 0 <= norm.attrs.get("eps", 0.0) < float("inf"):  # (also refuses NaN)
        return Fail(f"epsilon {norm.attrs['eps']} of {norm.name!r} is not a finite non-negative number")
    normalized = x.shape[norm.attrs["axis"] :]
    for name, weight in zip(("scale", "bias"), norm.inputs[1:], strict=False):
        if weight is None:
            continue
        if weight.const is None and (weight.producer is None or weight.producer.op != Op.CONSTANT):
            return Fail(f"{name} {weight.name!r} is computed at run time")
        if weight.dtype != x.dtype:
            return Fail(f"{name} {weight.name!r} is {weight.dtype}, the input {x.dtype}")
        if tuple(weight.shape or ()) != tuple(normalized):
            shape, normalized = list(weight.shape or []), list(normalized)
            return Fail(f"{name} {weight.name!r} has shape {shape}; the normalized dims are {normalized}")
    return None


def _residual(add: Node, axis: int) -> Fail | bool:
    """Why the add cannot be the fused op's residual, or whether its inputs swap places: the fused
    op's X is the one of the sum's shape, and the other may broadcast over X's leading dims
    (``graphopt.fused.broadcast_rows``: a position embedding [1, T, D] or [T, D] on [B, T, D])."""
    x, r = add.inputs
    if x.shape is not None and x.shape == r.shape and x.dtype == r.dtype:
        return False
    why = "the fused op adds equal shapes"
    if x.dtype == r.dtype and x.shape is not None and r.shape is not None:
        for swap, (full, other) in ((False, (x, r)), (True, (r, x))):
            if full.shape != add.output.shape:
                continue
            block = broadcast_block(other.shape, full.shape, axis)
            if block is None:
                # One row for every row is a bias (a linear layer's, which the runtime fuses with
                # its matmul), not a residual stream.
                why = f"{other.name!r} is one row added to every row, a bias"
            elif not isinstance(block, str):
                return swap
            else:
                why = f"the fused op cannot read it row by row: {other.name!r} {block}"
    return Fail(f"residual add {add.name!r} broadcasts ({x.shape} + {r.shape}); {why}")


def unless_constant(value, fill: float):
    """None for a weight that is all ``fill`` (exporters write ones and zeros for norms without affine)."""
    tensor = constant_of(value) if value is not None else None
    if tensor is not None and tensor.nbytes <= 1 << 24 and np.all(tensor.numpy() == fill):
        return None
    return value


def _weights(b, norm: Node, narrowed: list | None):
    """The fused op's scale and bias: the norm's own, or its float32 weights in the narrow type."""
    if narrowed is None:
        return [norm.input(1), norm.input(2) if norm.op == Op.LAYER_NORM else None]
    out = []
    for i, (array, fill, name) in enumerate(zip(narrowed, (1.0, 0.0), ("scale", "bias"), strict=False)):
        keep = array is not None and not np.all(array == fill)
        source = norm.input(i + 1)  # (the weight this narrowed copy was made from)
        out.append(b.constant(array, f"{norm.name}_{name}", derived_from=[source]) if keep else None)
    return out + [None] * (2 - len(out))


def _fused(b, norm: Node, x, residual, activation: Activation, narrowed: list | None = None):
    scale, bias = _weights(b, norm, narrowed)
    if narrowed is None:
        scale = unless_constant(scale, 1.0)
        bias = unless_constant(bias, 0.0)
    node = b.node(
        Op.NORM_ACT,
        x,
        scale,
        bias,
        residual,
        norm=NORM_KINDS[norm.op].attr,
        activation=activation.attr,
        eps=float(norm.attrs["eps"]),
        axis=norm.attrs["axis"],
    )
    return node.outputs


NORMS = tuple(NORM_KINDS)


def _norm(inner, between_casts: bool):
    """The norm of ``inner``; ``between_casts``: computed in float32 between Casts, as mixed-precision
    exports write a norm of a float16 or bfloat16 tensor."""
    if not between_casts:
        return op.any_of(*NORMS)(inner, ...).named("norm")
    return op.cast(op.any_of(*NORMS)(op.cast(inner).named("up"), ...).named("norm")).named("down")


def _narrowed(match, storage: DType | None) -> list | Fail | None:
    """For a norm between casts: its weights in the storage type (the fused op reads them so and
    accumulates in float32 as the norm did), a Fail, or None when the casts are not that form.
    Without a fused op to land in, the norm stays in float32: the narrow type overflows (x² for
    |x| > 256 in float16)."""
    if "up" not in match.nodes:
        return []
    up, norm, down = match.node("up"), match.node("norm"), match.node("down")
    if storage not in KERNEL_DTYPES - {DType.FLOAT32} or up.attrs["to"] != DType.FLOAT32:
        return None
    if down.attrs["to"] != storage:
        return None
    inner = [node.output for node in (up, norm, down) if node is not match.root]
    reason = why_kept(match.root.graph, inner, match.matched)
    if reason:
        return Fail(reason)
    weights = []
    for name, weight in zip(("scale", "bias"), norm.inputs[1:], strict=False):
        tensor = constant_of(weight) if weight is not None else None
        if weight is not None and tensor is None:
            return Fail(f"{name} {weight.name!r} is computed at run time")
        with np.errstate(over="ignore"):  # (a weight past the type's range is refused just below)
            array = None if tensor is None else tensor.numpy().astype(storage.numpy)
        if array is not None and not np.all(np.isfinite(array)):
            return Fail(f"{name} {weight.name!r} does not fit in {storage}")
        weights.append(array)
    return weights


def _info(match, narrowed):
    return match.with_info(narrowed=narrowed or None)


def act_pattern(x):
    return op.any_of(*ACTIVATION_OPS)(_norm(x, False))


def cast_act_pattern(x):
    return op.any_of(*ACTIVATION_OPS)(_norm(x, True))


def check_act(match):
    narrowed = _narrowed(match, match["x"].dtype)
    if narrowed is None or isinstance(narrowed, Fail):
        return narrowed
    return check_norm(match.node("norm")) or _info(match, narrowed)


def replace_act(b, match):
    narrowed = match.info["narrowed"]
    return _fused(b, match.node("norm"), match["x"], None, activation_of(match.root), narrowed)[0]


def transposed_act_pattern(x):
    return op.any_of(*ACTIVATION_OPS)(op.transpose(_norm(x, False)).named("layout"))


def check_transposed_act(match):
    return check_norm(match.node("norm")) or _info(match, None)


def replace_transposed_act(b, match):
    """The activation moves before the transpose (an elementwise op commutes with it, exactly)."""
    fused = _fused(b, match.node("norm"), match["x"], None, activation_of(match.root), None)[0]
    return b.transpose(fused, perm=match.node("layout").attrs["perm"])


def add_act_pattern(x, r):
    return op.any_of(*ACTIVATION_OPS)(_norm(op.add(x, r).named("add"), False))


def cast_add_act_pattern(x, r):
    return op.any_of(*ACTIVATION_OPS)(_norm(op.add(x, r).named("add"), True))


def add_norm_pattern(x, r):
    return _norm(op.add(x, r).named("add"), False)


def cast_add_norm_pattern(x, r):
    return _norm(op.add(x, r).named("add"), True)


def _check_add(match, last: Node):
    """``last``: the node whose output the fused op's first output replaces (the norm, or the cast
    after it), when no activation follows."""
    norm = match.node("norm")
    narrowed = _narrowed(match, match.node("add").output.dtype)
    if narrowed is None or isinstance(narrowed, Fail):
        return narrowed
    failure = check_norm(norm)
    if failure:
        return failure
    swap = _residual(match.node("add"), norm.attrs["axis"])
    if isinstance(swap, Fail):
        return swap
    reason = why_kept(match.root.graph, [last.output], [match.root]) if match.root is not last else None
    return Fail(reason) if reason else _info(match, narrowed).with_info(swap=swap)


def _last(match) -> Node:
    return match.nodes.get("down") or match.node("norm")


def check_add_act(match):
    return _check_add(match, _last(match))


def check_add_norm(match):
    return _check_add(match, match.root)


def _replace_add(b, match, activation: Activation):
    norm, narrowed = match.node("norm"), match.info["narrowed"]
    x, r = (match["r"], match["x"]) if match.info["swap"] else (match["x"], match["r"])
    y, total = _fused(b, norm, x, r, activation, narrowed)
    return {match.root.output: y, match.node("add").output: total}


def replace_add_act(b, match):
    return _replace_add(b, match, activation_of(match.root))


def replace_add_norm(b, match):
    return _replace_add(b, match, Activation.IDENTITY)


def view_add_act_pattern(x, r):
    return op.any_of(*ACTIVATION_OPS)(_norm(op.reshape(op.add(x, r).named("add")).named("view"), False))


def view_add_norm_pattern(x, r):
    return _norm(op.reshape(op.add(x, r).named("add")).named("view"), False)


def _check_view(match, last: Node):
    """A view between the residual add and the norm: one that keeps the normalized dims, of an add
    of two operands of its shape, and the only reader of the sum."""
    add, view, norm = match.node("add"), match.node("view"), match.node("norm")
    if len(view.inputs) != 1 or "shape" not in view.attrs:
        return None  # (a raw reshape, its shape computed at run time)
    x, r = add.inputs
    if x.shape is None or x.shape != r.shape or x.shape != add.output.shape or x.dtype != r.dtype:
        return Fail(f"residual add {add.name!r} before view {view.name!r} broadcasts its operands")
    failure = check_norm(norm)
    if failure:
        return failure
    kept = len(view.output.shape) - norm.attrs["axis"]
    if tuple(x.shape[len(x.shape) - kept :]) != tuple(view.output.shape[-kept:]):
        return Fail(f"view {view.name!r} changes the dims that norm {norm.name!r} normalizes")
    reason = why_kept(match.root.graph, [add.output], [view])
    if not reason and match.root is not last:
        reason = why_kept(match.root.graph, [last.output], [match.root])
    return Fail(reason) if reason else match


def check_view_add_act(match):
    return _check_view(match, match.node("norm"))


def check_view_add_norm(match):
    return _check_view(match, match.root)


def _replace_view(b, match, activation: Activation):
    shape = match.node("view").attrs["shape"]
    x, r = (b.reshape(match[name], shape=shape) for name in ("x", "r"))
    y, total = _fused(b, match.node("norm"), x, r, activation)
    return {match.root.output: y, match.node("view").output: total}


def replace_view_add_act(b, match):
    return _replace_view(b, match, activation_of(match.root))


def replace_view_add_norm(b, match):
    return _replace_view(b, match, Activation.IDENTITY)


def _rules(suffix: str, act, add_act, add_norm) -> list[Rule]:
    return [
        Rule(f"fuse_add_norm_act{suffix}", add_act, replace_add_act, check_add_act, allow_external_uses=True),
        Rule(f"fuse_norm_act{suffix}", act, replace_act, check_act),
        Rule(f"fuse_add_norm{suffix}", add_norm, replace_add_norm, check_add_norm, allow_external_uses=True),
    ]


PASS = rewrite_pass(
    "fuse_norm_act",
    "Fuse layer/RMS norm + activation (and a residual add before the norm) into graphopt.NormAct; a "
    "norm computed in float32 between Casts fuses in the storage type, accumulating in float32.",
    [
        Rule(
            "fuse_add_norm_act_through_view",
            view_add_act_pattern,
            replace_view_add_act,
            check_view_add_act,
            allow_external_uses=True,
        ),
        *_rules("", act_pattern, add_act_pattern, add_norm_pattern),
        Rule(
            "fuse_norm_act_through_transpose",
            transposed_act_pattern,
            replace_transposed_act,
            check_transposed_act,
        ),
        Rule(
            "fuse_add_norm_through_view",
            view_add_norm_pattern,
            replace_view_add_norm,
            check_view_add_norm,
            allow_external_uses=True,
        ),
        *_rules("_between_casts", cast_act_pattern, cast_add_act_pattern, cast_add_norm_pattern),
    ],
)
