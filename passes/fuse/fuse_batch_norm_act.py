"""fuse_batch_norm_act: an inference batch norm with no conv to fold into, and its activation, become one
``graphopt.AffineAct`` node.

In inference a batch norm is a per-channel affine map, ``y = x * s + (beta - mean * s)`` with
``s = gamma / sqrt(var + eps)``. ``fold_batch_norm`` folds it into a conv or linear before it; one after
anything else (a residual add, a concat, the input) stays a pass over the activations of its own, and
its activation another. Fused: one read, one write, the channel on axis 1.

Both spellings: aten's inference batch norms (torch.export) and ONNX ``BatchNormalization`` (which both
ONNX exporters leave where no conv precedes it). ``s`` and the shift are computed in float64 from the
constant statistics and stored in x's dtype.

Not an ONNX batch norm between convolutions, as in DenseNet's pre-activation blocks
(concat → batch norm → relu → conv): ONNX Runtime's CPU EP runs convolutions, pools and the concats,
adds and activations between them in a blocked channel layout (NCHWc), and such a batch norm there as a
depthwise conv with its activation fused; a fused op in the middle would leave and re-enter that
layout, two reorders each (DenseNet-121: 248 → 370 nodes in ONNX Runtime's graph; its last batch norm,
before the global pool, moved that pool out of the layout). At the end of such a run (a graph output, a
flatten) the layout is left anyway, and the fusion stays.
"""

from __future__ import annotations

import numpy as np
from graphopt.passes.canonicalize.batch_norms import ALL_BATCH_NORMS as BATCH_NORMS
from graphopt.passes.canonicalize.batch_norms import ONNX_BATCH_NORM, batch_norm_affine

from graphopt.ir import Op, Value, opaque_name
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .activations import ACTIVATION_OPS, activation_of
from .fuse_bias_act import check_fusable

# The ops ONNX Runtime's CPU EP runs in its blocked channel layout, and those that keep a tensor in it.
_BLOCKED = frozenset(
    opaque_name("onnx", name)
    for name in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
)
_KEEPS_LAYOUT = frozenset({Op.CONCAT, Op.ADD, *ACTIVATION_OPS})
_SEARCH_DEPTH = 4


def _from_blocked_layout(value: Value, depth: int = _SEARCH_DEPTH) -> bool:
    producer = value.producer
    if producer is None or depth == 0:
        return False
    if producer.op in _BLOCKED:
        return True
    return producer.op in _KEEPS_LAYOUT and any(
        _from_blocked_layout(v, depth - 1) for v in producer.inputs if v is not None
    )


def _between_convolutions(norm, activation) -> str | None:
    """The conv or pool that reads the activation, where the batch norm's input comes from the blocked
    layout too (see the module's docstring); None otherwise."""
    if norm.op != ONNX_BATCH_NORM or norm.input(0).rank != 4 or not _from_blocked_layout(norm.input(0)):
        return None
    reader = next((n for n in activation.output.users() if n.op in _BLOCKED), None)
    return reader.name if reader is not None else None


def pattern(x):
    return op.any_of(*ACTIVATION_OPS)(op.any_of(*BATCH_NORMS)(x, ...).named("norm"))


def check(match):
    x, norm = match["x"], match.node("norm")
    failure = check_fusable(x, match.root)
    if failure:
        return failure
    if x.rank < 2:
        return Fail(f"{x.name!r} has no channel axis")
    reader = _between_convolutions(norm, match.root)
    if reader is not None:
        return Fail(
            f"{norm.name!r} sits between convolutions ({reader!r} reads its activation): ONNX Runtime "
            "runs it in its blocked channel layout with the activation fused, and a fused op there would "
            "cost two layout reorders"
        )
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
