"""fuse_batch_norm_act: an inference batch norm with no conv to fold into, and its activation, become one
``graphopt.AffineAct`` node.

In inference a batch norm is a per-channel affine map, ``y = x * s + (beta - mean * s)`` with
``s = gamma / sqrt(var + eps)``. ``fold_batch_norm`` folds it into a conv or linear before it; one after
anything else (a residual add, a concat, the input) stays a pass over the activations of its own, and
its activation another. Fused: one read, one write, the channel on axis 1.

Both spellings: aten's inference batch norms (torch.export) and ONNX ``BatchNormalization`` (which both
ONNX exporters leave where no conv precedes it). ``s`` and the shift are computed in float64 from the
constant statistics and stored in x's dtype.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from graphopt.ir import Node, constant_of, opaque_name
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .fold_batch_norm import BATCH_NORMS as ATEN_BATCH_NORMS
from .fuse_bias_act import check_fusable
from .fuse_norm_act import ACTS, activation_of

ONNX_BATCH_NORM = opaque_name("onnx", "BatchNormalization")
BATCH_NORMS = (*ATEN_BATCH_NORMS, ONNX_BATCH_NORM)
ONNX_DEFAULT_EPSILON = 1e-5


def inference_epsilon(norm: Node) -> float | Fail:
    """The batch norm's epsilon, or why it is not known to be an inference batch norm."""
    if norm.op == ONNX_BATCH_NORM:
        attrs = {a.name: helper.get_attribute_value(a) for a in norm.source.attribute}
        if attrs.get("training_mode", 0) != 0 or attrs.get("is_test", 1) == 0:
            return Fail(f"{norm.name!r} is in training mode")
        return float(attrs.get("epsilon", ONNX_DEFAULT_EPSILON))
    if norm.attrs.get("training") is not False or "eps" not in norm.attrs:
        return Fail(f"{norm.name!r} is not known to be in inference mode")
    return float(norm.attrs["eps"])


def batch_norm_affine(norm: Node) -> tuple[np.ndarray, np.ndarray] | Fail:
    """The batch norm's per-channel ``(s, beta - mean * s)`` in float64, or why they are not constant."""
    eps = inference_epsilon(norm)
    if isinstance(eps, Fail):
        return eps
    if any(norm.graph.is_used(v) for v in norm.outputs[1:]):
        return Fail(f"{norm.name!r}'s saved statistics are read")
    x = norm.input(0)
    if x is None or x.rank is None or x.rank < 2 or not isinstance(x.shape[1], int):
        return Fail(f"the channel count of {norm.name!r}'s input is unknown")
    channels = x.shape[1]
    arrays = []
    for value, default in zip(norm.inputs[1:5], (1.0, 0.0, None, None), strict=False):
        if value is None and default is not None:
            arrays.append(np.full(channels, default))
            continue
        tensor = constant_of(value) if value is not None else None
        if tensor is None or tensor.shape != (channels,):
            name = "absent" if value is None else repr(value.name)
            return Fail(f"{norm.name!r} reads {name}, not a constant of {channels} channels")
        arrays.append(tensor.numpy().astype(np.float64))
    if len(arrays) != 4:
        return Fail(f"{norm.name!r} does not read gamma, beta, mean and variance")
    gamma, beta, mean, var = arrays
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale


def pattern(x):
    return op.any_of(*ACTS)(op.any_of(*BATCH_NORMS)(x, ...).named("norm"))


def check(match):
    x, norm = match["x"], match.node("norm")
    failure = check_fusable(x, match.root)
    if failure:
        return failure
    if x.rank < 2:
        return Fail(f"{x.name!r} has no channel axis")
    affine = batch_norm_affine(norm)
    if isinstance(affine, Fail):
        return affine
    scale, shift = (a.astype(x.dtype.numpy) for a in affine)
    if not (np.isfinite(scale).all() and np.isfinite(shift).all()):
        return Fail(f"{norm.name!r}'s scale or shift does not fit in {x.dtype}")
    return match.with_info(scale=scale, shift=shift)


def replace(b, match):
    norm = match.node("norm")
    weights = [norm.input(i) for i in range(1, 5)]
    scale = b.constant(match.info["scale"], f"{norm.name}_scale", derived_from=weights)
    shift = b.constant(match.info["shift"], f"{norm.name}_shift", derived_from=weights)
    return b.affine_act(match["x"], scale, shift, activation=activation_of(match.root).attr, axis=1)


PASS = rewrite_pass(
    "fuse_batch_norm_act",
    "Fuse an inference batch norm that no conv takes in (aten or ONNX) and its activation into "
    "graphopt.AffineAct.",
    [Rule("fuse_batch_norm_act", pattern, replace, check)],
)
