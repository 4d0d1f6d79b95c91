"""recognize_group_norms: the group norm both torch.onnx exporters write becomes one ``group_norm`` op.

Neither exporter writes GroupNormalization for ``nn.GroupNorm`` (before opset 21 it scales per group, not
per channel): both write ``Reshape(x, [0, G, -1]) → InstanceNormalization(ones, zeros) → Reshape(back
to x's shape) → Mul(weight [C, 1, ...]) → Add(bias [C, 1, ...])``. The three nodes become one group norm,
and the per-channel scale and bias that follow fold into it, so ``fuse_group_norm_act`` matches one form.
Where there is one channel per group (``nn.GroupNorm(C, C)``, as wav2vec2's feature extractor writes it)
the reshapes are no-ops, which the dynamo exporter leaves out or ``drop_noop_reshape`` removes: a bare
InstanceNormalization is the group norm with one group per channel, its scale and bias per channel.
What no fusion takes goes back as it came (``restore_unfused``).
"""

from __future__ import annotations

import numpy as np

from graphopt.ir import Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .origin import note_origin


def instance_norm_pattern(x, s, b):
    grouped = op.reshape(x).named("split")
    return op.reshape(op.instance_norm(grouped, s, b).named("norm"), ...).named("merge")


def _all(value, fill: float) -> bool:
    tensor = constant_of(value)
    return tensor is not None and bool(np.all(tensor.numpy() == fill))


def _restores_shape(merge, x) -> bool:
    """Whether the closing reshape gives back x's shape: a static shape equal to x's, or x's own
    run-time shape (``Reshape(y, Shape(x))``, as exported with dynamic dims)."""
    if len(merge.inputs) == 1:
        shape = merge.output.shape
        return shape is not None and shape == x.shape and all(type(d) is int for d in shape)
    source = merge.input(1).producer
    return (
        source is not None
        and source.op == Op.SHAPE
        and source.input(0) is x
        and not source.attrs.get("start", 0)
        and source.attrs.get("end") is None
    )


def check_instance_norm(match):
    x, split, norm, merge = match["x"], match.node("split"), match.node("norm"), match.node("merge")
    if x.dtype is None or not x.dtype.is_float or x.rank is None or x.rank < 2:
        return None
    channels = x.shape[1]
    shape = tuple(split.attrs["shape"])
    if len(shape) != 3 or shape[0] not in (0, x.shape[0]) or shape[2] != -1 or type(shape[1]) is not int:
        return Fail(f"{split.name!r} does not view {x.name!r} as [N, groups, -1]")
    groups = shape[1]
    if type(channels) is not int or groups <= 0 or channels % groups:
        return Fail(f"{x.name!r} has {channels} channels, which do not split into {groups} groups")
    if not (_all(match["s"], 1.0) and _all(match["b"], 0.0)):
        return Fail(f"instance norm {norm.name!r} scales or shifts its groups")
    if not _restores_shape(merge, x):
        return Fail(f"{merge.name!r} does not reshape back to the shape of {x.name!r}")
    return match.with_info(groups=groups, eps=float(norm.attrs["eps"]))


def replace_instance_norm(b, match):
    return b.group_norm(match["x"], None, None, groups=match.info["groups"], eps=match.info["eps"])


def bare_instance_norm_pattern(x, s, b):
    return op.instance_norm(x, s, b).named("norm")


def check_bare_instance_norm(match):
    x, norm = match["x"], match.node("norm")
    if x.dtype is None or not x.dtype.is_float or x.rank is None or x.rank < 3 or type(x.shape[1]) is not int:
        return None
    if any(user.op == Op.RESHAPE for user in norm.output.users()):
        return Fail(f"{norm.name!r} is reshaped after: the exporters' group norm spelling, if anything")
    scale, bias = constant_of(match["s"]), constant_of(match["b"])
    if scale is None or bias is None:
        return Fail(f"instance norm {norm.name!r} takes its scale or bias at run time")
    channels = x.shape[1]
    if tuple(scale.shape) != (channels,) or tuple(bias.shape) != (channels,):
        return Fail(f"instance norm {norm.name!r} has no scale and bias per channel of {x.name!r}")
    return match.with_info(groups=channels, eps=float(norm.attrs["eps"]))


def replace_bare_instance_norm(b, match):
    """One group per channel; a scale of ones and a bias of zeros are left out, so that the scale and
    bias the exporters write after the norm fold in."""
    scale = None if _all(match["s"], 1.0) else match["s"]
    bias = None if scale is None and _all(match["b"], 0.0) else match["b"]
    return b.group_norm(match["x"], scale, bias, groups=match.info["groups"], eps=match.info["eps"])


def scale_pattern(x, w):
    return op.mul(op.group_norm(x, ...).named("norm"), w)


def bias_pattern(x, c):
    return op.add(op.group_norm(x, ...).named("norm"), c)


def _per_channel(match, name: str, absent: tuple[int, ...]):
    """The constant ``name`` as one value per channel of x ([C], [C, 1, ...] or [1, C, 1, ...]), or
    why not; the norm's inputs at ``absent`` must not be given yet."""
    norm, x, weight = match.node("norm"), match["x"], match[name]
    if any(norm.input(i) is not None for i in absent):
        return Fail(f"{norm.name!r} already has its {'scale' if absent == (1, 2) else 'bias'}")
    tensor = constant_of(weight)
    if tensor is None:
        return Fail(f"{weight.name!r} is computed at run time")
    channels, shape = x.shape[1], tuple(tensor.shape)
    forms = {(channels,) + (1,) * k for k in range(x.rank - 1)} | {(1, channels) + (1,) * (x.rank - 2)}
    if shape not in forms or weight.dtype != x.dtype:
        return Fail(
            f"{weight.name!r} ({weight.dtype}{list(shape)}) is not one value per channel of {x.name!r}"
        )
    return tensor.numpy().reshape(channels)


def check_scale(match):
    array = _per_channel(match, "w", (1, 2))
    return array if isinstance(array, Fail) else match.with_info(array=array)


def replace_scale(b, match):
    norm = match.node("norm")
    scale = b.constant(match.info["array"], f"{norm.name}_scale", derived_from=[match["w"]])
    return b.group_norm(match["x"], scale, None, **norm.attrs)


def check_bias(match):
    array = _per_channel(match, "c", (2,))
    return array if isinstance(array, Fail) else match.with_info(array=array)


def replace_bias(b, match):
    norm = match.node("norm")
    bias = b.constant(match.info["array"], f"{norm.name}_bias", derived_from=[match["c"]])
    return b.group_norm(match["x"], norm.input(1), bias, **norm.attrs)


PASS = rewrite_pass(
    "recognize_group_norms",
    "Turn the exporters' Reshape → InstanceNormalization → Reshape spelling of group norm, and a bare "
    "InstanceNormalization (one group per channel), with the per-channel scale and bias after them, "
    "into group norm ops.",
    [
        Rule(
            "group_norm_from_instance_norm", instance_norm_pattern, replace_instance_norm, check_instance_norm
        ),
        Rule(
            "group_norm_from_bare_instance_norm",
            bare_instance_norm_pattern,
            replace_bare_instance_norm,
            check_bare_instance_norm,
        ),
        Rule("fold_group_norm_scale", scale_pattern, replace_scale, check_scale),
        Rule("fold_group_norm_bias", bias_pattern, replace_bias, check_bias),
    ],
    on_rewrite=note_origin,
)
