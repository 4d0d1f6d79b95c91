"""fuse_group_norm_act: group norm followed by an activation becomes one ``graphopt.GroupNormAct`` node.

Every diffusion UNet and VAE block starts with ``group_norm → silu``, often with the residual add of
the block before in front (``x + h → group_norm → silu``, the sum read again by the next skip). Fused,
each (sample, group) is read once and written once; the add folds in, with the sum as a second output
for the readers that still need it.
"""

from __future__ import annotations

import numpy as np

from graphopt.fused.group_norm_act import GROUP_NORM_ACT
from graphopt.fused.onnx_decompose import MIN_OPSET as FALLBACK_MIN_OPSET
from graphopt.fused.spec import Activation
from graphopt.ir import DType, Node, Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .activations import ACTIVATION_OPS, activation_of

KERNEL_DTYPES = frozenset(DType[name.upper()] for name in GROUP_NORM_ACT.dtypes)


def _weight(norm: Node, index: int, channels: int) -> np.ndarray | Fail | None:
    """Input ``index`` of the norm as one value per channel (a per-group weight, as ONNX's
    GroupNormalization before opset 21 has it, repeated over its group's channels)."""
    weight = norm.input(index)
    if weight is None:
        return None
    name = ("scale", "bias")[index - 1]
    tensor = constant_of(weight)
    if tensor is None:
        return Fail(f"{name} {weight.name!r} is computed at run time")
    x = norm.input(0)
    if weight.dtype != x.dtype:
        return Fail(f"{name} {weight.name!r} is {weight.dtype}, the input {x.dtype}")
    groups, array = norm.attrs["groups"], tensor.numpy()
    if array.shape == (groups,):
        return np.repeat(array, channels // groups)
    if array.shape != (channels,):
        return Fail(
            f"{name} {weight.name!r} has shape {list(array.shape)}; expected [{channels}] or [{groups}]"
        )
    return array


def check_group_norm(norm: Node) -> list | Fail:
    """The norm's scale and bias per channel (None where absent or trivial), or why the fused
    kernels cannot compute it."""
    opset = norm.graph.meta.get("opset", {}).get("")
    if opset is not None and opset < FALLBACK_MIN_OPSET:
        return Fail(f"the model imports opset {opset}; fused ops need opset {FALLBACK_MIN_OPSET} or newer")
    x, groups, eps = norm.input(0), norm.attrs["groups"], norm.attrs["eps"]
    if x.dtype not in KERNEL_DTYPES:
        return Fail(f"{x.name!r} is {x.dtype}; the fused kernels take float32, float16 and bfloat16")
    if x.rank is None or x.rank < 2 or type(x.shape[1]) is not int:
        return Fail(f"the channels of {x.name!r} are unknown")
    channels = x.shape[1]
    if groups <= 0 or channels % groups:
        return Fail(f"{x.name!r} has {channels} channels, which do not split into {groups} groups")
    if not 0 <= eps < float("inf"):  # (also refuses NaN)
        return Fail(f"epsilon {eps} of {norm.name!r} is not a finite non-negative number")
    weights = []
    for index, fill in ((1, 1.0), (2, 0.0)):
        array = _weight(norm, index, channels)
        if isinstance(array, Fail):
            return array
        weights.append(None if array is None or np.all(array == fill) else array)
    return weights


def _fused(b, match, residual, activation: Activation):
    norm = match.node("norm")
    weights = []
    for array, name, index in zip(match.info["weights"], ("scale", "bias"), (1, 2), strict=True):
        source = norm.input(index)
        weights.append(
            None if array is None else b.constant(array, f"{norm.name}_{name}", derived_from=[source])
        )
    node = b.node(
        Op.GROUP_NORM_ACT,
        match["x"],
        *weights,
        residual,
        groups=norm.attrs["groups"],
        activation=activation.attr,
        eps=float(norm.attrs["eps"]),
    )
    return node.outputs


def act_pattern(x):
    return op.any_of(*ACTIVATION_OPS)(op.group_norm(x, ...).named("norm"))


def check_act(match):
    weights = check_group_norm(match.node("norm"))
    return weights if isinstance(weights, Fail) else match.with_info(weights=weights)


def replace_act(b, match):
    return _fused(b, match, None, activation_of(match.root))[0]


def add_act_pattern(x, r):
    return op.any_of(*ACTIVATION_OPS)(op.group_norm(op.add(x, r).named("add"), ...).named("norm"))


def _residual(add: Node) -> Fail | None:
    x, r = add.inputs
    if x.shape is None or x.shape != r.shape or x.dtype != r.dtype:
        return Fail(
            f"residual add {add.name!r} broadcasts ({x.shape} + {r.shape}); the fused op adds equal shapes"
        )
    return None


def check_add_act(match):
    norm = match.node("norm")
    failure = _residual(match.node("add"))
    if failure is not None:
        return failure
    if match.root.graph.is_output(norm.output) or any(u.node is not match.root for u in norm.output.uses):
        return Fail(f"{norm.output.name!r} is also read outside the fused region")
    return check_act(match)


def replace_add_act(b, match):
    y, total = _fused(b, match, match["r"], activation_of(match.root))
    return {match.root.output: y, match.node("add").output: total}


def add_norm_pattern(x, r):
    return op.group_norm(op.add(x, r).named("add"), ...).named("norm")


def check_add_norm(match):
    """A residual add before a group norm that no activation follows (the norm in front of a VAE's
    attention): fused, the sum is read once and written once instead of written and read again."""
    add = match.node("add")
    x, r = add.inputs
    if x.shape is None or x.shape != r.shape or x.dtype != r.dtype:
        return Fail(
            f"residual add {add.name!r} broadcasts ({x.shape} + {r.shape}); the fused op adds equal shapes"
        )
    return check_act(match)


def replace_add_norm(b, match):
    y, total = _fused(b, match, match["r"], Activation.IDENTITY)
    return {match.root.output: y, match.node("add").output: total}


PASS = rewrite_pass(
    "fuse_group_norm_act",
    "Fuse group norm + activation, a residual add before the norm, or both, into graphopt.GroupNormAct.",
    [
        Rule(
            "fuse_add_group_norm_act",
            add_act_pattern,
            replace_add_act,
            check_add_act,
            allow_external_uses=True,
        ),
        Rule("fuse_group_norm_act", act_pattern, replace_act, check_act),
        Rule(
            "fuse_add_group_norm",
            add_norm_pattern,
            replace_add_norm,
            check_add_norm,
            allow_external_uses=True,
        ),
    ],
)
