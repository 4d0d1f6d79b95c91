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
from graphopt.passes.canonicalize.batch_norms import ALL_BATCH_NORMS as BATCH_NORMS
from graphopt.passes.canonicalize.batch_norms import batch_norm_affine

from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .activations import ACTIVATION_OPS, activation_of
from .fuse_bias_act import check_fusable


def pattern(x):
    return op.any_of(*ACTIVATION_OPS)(op.any_of(*BATCH_NORMS)(x, ...).named("norm"))


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
