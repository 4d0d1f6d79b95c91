"""fuse_norm_act: layer/RMS norm followed by an activation becomes one ``graphopt.NormAct`` node.

Both ops are memory-bound; fused, each row is read once and written once. A residual add in front of
the norm (``x + r → norm → act``, the transformer pattern) folds in too, with the sum as a second
output for the layers that still read it.
"""

from __future__ import annotations

import numpy as np

from graphopt.fused.table import Activation, Norm
from graphopt.ir import DType, Node, Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

KERNEL_DTYPES = frozenset({DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16})
_ACTIVATIONS = {
    Op.RELU: Activation.RELU,
    Op.TANH: Activation.TANH,
    Op.SILU: Activation.SILU,
    Op.SIGMOID: Activation.SIGMOID,
}
_NORMS = {Op.LAYER_NORM: Norm.LAYER, Op.RMS_NORM: Norm.RMS}


def activation_of(node: Node) -> Activation:
    if node.op == Op.GELU:
        return Activation.GELU_TANH if node.attrs.get("approximate") == "tanh" else Activation.GELU
    return _ACTIVATIONS[node.op]


def check_norm(norm: Node) -> Fail | None:
    """Why the fused kernels cannot compute this norm, or None."""
    x = norm.input(0)
    if x.dtype not in KERNEL_DTYPES:
        return Fail(f"{x.name!r} is {x.dtype}; the fused kernels take float32, float16 and bfloat16")
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


def _residual(add: Node) -> Fail | None:
    x, r = add.inputs
    if x.shape is None or x.shape != r.shape or x.dtype != r.dtype:
        return Fail(
            f"residual add {add.name!r} broadcasts ({x.shape} + {r.shape}); the fused op adds equal shapes"
        )
    return None


def _unless_constant(value, fill: float):
    """None for a weight that is all ``fill`` (exporters write ones and zeros for norms without affine)."""
    tensor = constant_of(value) if value is not None else None
    if tensor is not None and tensor.nbytes <= 1 << 24 and np.all(tensor.numpy() == fill):
        return None
    return value


def _fused(b, norm: Node, x, residual, activation: Activation):
    scale = _unless_constant(norm.input(1), 1.0)
    bias = _unless_constant(norm.input(2), 0.0) if norm.op == Op.LAYER_NORM else None
    node = b.node(
        Op.NORM_ACT,
        x,
        scale,
        bias,
        residual,
        norm=_NORMS[norm.op].attr,
        activation=activation.attr,
        eps=float(norm.attrs["eps"]),
        axis=norm.attrs["axis"],
    )
    return node.outputs


ACTS = (*_ACTIVATIONS, Op.GELU)
NORMS = tuple(_NORMS)


def act_pattern(x):
    return op.any_of(*ACTS)(op.any_of(*NORMS)(x, ...).named("norm"))


def check_act(match):
    return check_norm(match.node("norm")) or match


def replace_act(b, match):
    return _fused(b, match.node("norm"), match["x"], None, activation_of(match.root))[0]


def add_act_pattern(x, r):
    return op.any_of(*ACTS)(op.any_of(*NORMS)(op.add(x, r).named("add"), ...).named("norm"))


def add_norm_pattern(x, r):
    return op.any_of(*NORMS)(op.add(x, r).named("add"), ...)


def _check_add(match, norm: Node):
    failure = check_norm(norm) or _residual(match.node("add"))
    if failure:
        return failure
    if match.root is not norm and any(use.node is not match.root for use in norm.output.uses):
        return Fail(f"{norm.output.name!r} is also read outside the fused region")
    return match


def check_add_act(match):
    return _check_add(match, match.node("norm"))


def check_add_norm(match):
    return _check_add(match, match.root)


def _replace_add(b, match, norm: Node, activation: Activation):
    y, total = _fused(b, norm, match["x"], match["r"], activation)
    return {match.root.output: y, match.node("add").output: total}


def replace_add_act(b, match):
    return _replace_add(b, match, match.node("norm"), activation_of(match.root))


def replace_add_norm(b, match):
    return _replace_add(b, match, match.root, Activation.IDENTITY)


PASS = rewrite_pass(
    "fuse_norm_act",
    "Fuse layer/RMS norm + activation (and a residual add before the norm) into graphopt.NormAct.",
    [
        Rule("fuse_add_norm_act", add_act_pattern, replace_add_act, check_add_act, allow_external_uses=True),
        Rule("fuse_norm_act", act_pattern, replace_act, check_act),
        Rule("fuse_add_norm", add_norm_pattern, replace_add_norm, check_add_norm, allow_external_uses=True),
    ],
)
