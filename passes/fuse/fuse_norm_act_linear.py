"""fuse_norm_act_linear: norm → activation → a narrow linear layer (→ bias → activation) as one kernel.

When the linear layer has few outputs (the seed: D → 1), the matmul moves almost no data of its own;
computing it in the norm kernel's epilogue, while the normalized row is still in registers, saves a
full write and read of the activation tensor and two launches. Wider layers stay with the matmul
library: ``MAX_OUT_FEATURES`` is the width up to which the fused kernel wins, per storage dtype
(measured by bench/bench_kernels.py on an H100, rows=16384, D=256: bench/results/kernels.md; float32
fused beats norm kernel + cuBLAS through K=16 (21.4 against 25.4 µs) and loses at K=64 (60.8 against
34.4); bfloat16 wins at K=4, loses at K=16). Widths past the last measured win stay unfused: float32's
limit was 32, a width never measured. On ONNX Runtime's CPU EP the fused kernel takes 0.4-0.9 of the
time of ONNX Runtime's own norm, activation, MatMul and Add at every width admitted here (D = 32-768,
64 and 4096 rows, one and two threads: bench/results/2026-11-28-cpu/); ``--measure cpu`` on the target
machine still refuses a rewrite that runs slower there.

The NormAct may add a residual first (``x + f(x) → norm → act → Linear(D, K)``): the fused op adds
it too, and returns the sum for the layers that read it. Its scale and bias may be read row by row
(per-feature norms after horizontal batching), and so may the linear layer's weight and bias: a
batched matmul with one [D, K] matrix per feature plus a bias per feature is what per-feature
Linear(D, K) layers batch to.
"""

from __future__ import annotations

import inspect

import numpy as np

from graphopt.fused.broadcast_rows import broadcast_block, row_broadcast
from graphopt.fused.norm_act_linear.spec import weight_rows
from graphopt.ir import DType, Node, Op, constant_of
from graphopt.rewrite import Fail, Rule, op, rewrite_pass, why_kept

from .activations import ACTIVATION_OPS, activation_of

MAX_OUT_FEATURES = {DType.FLOAT32: 16, DType.FLOAT16: 4, DType.BFLOAT16: 4}


def linear_pattern(h, w):
    return op.linear(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w, ...)


def matmul_bias_pattern(h, w, c):
    return op.add(op.matmul(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w).named("matmul"), c)


def matmul_pattern(h, w):
    return op.matmul(op.any_of(Op.NORM_ACT)(h, ...).named("norm_act"), w)


def _with_activation(inner):
    def pattern(h, w, *rest):
        return op.any_of(*ACTIVATION_OPS)(inner(h, w, *rest).named("linear"))

    pattern.__signature__ = inspect.signature(inner)  # the matcher names variables after parameters
    return pattern


def _check(match, linear: Node):
    norm_act = match.node("norm_act")
    x = norm_act.input(0)
    if x.rank is None or norm_act.attrs["axis"] != x.rank - 1:
        return Fail(f"{norm_act.name!r} normalizes more than the last dim")
    operands = (("scale", norm_act.input(1)), ("bias", norm_act.input(2)), ("residual", norm_act.input(3)))
    for name, value in operands:
        failure = _read_by_rows(name, value, x)
        if failure:
            return failure
    # The residual sum may be read elsewhere (the fused op returns it too); nothing else may.
    total = norm_act.outputs[1] if len(norm_act.outputs) > 1 else None
    reason = why_kept(match.root.graph, [v for v in match.inner_values() if v is not total], match.matched)
    if reason:
        return Fail(reason)
    weight = _weight(match, linear, x)
    if isinstance(weight, Fail):
        return weight
    k = weight.shape[-2]
    limit = MAX_OUT_FEATURES.get(x.dtype, 0)
    if k > limit:
        return Fail(f"{k} output features; above {limit} ({x.dtype}) the matmul library is faster")
    bias = _bias(match, linear, (*x.shape[:-1], k))
    if isinstance(bias, Fail):
        return bias
    return match.with_info(weight=np.ascontiguousarray(weight), bias=bias)


def _read_by_rows(name: str, value, x) -> Fail | None:
    """Why the fused kernel cannot read the NormAct's ``name`` row by row (as NormAct reads it when
    normalizing the last dim), or None."""
    if value is None:
        return None
    block = "its shape is unknown" if value.shape is None else broadcast_block(value.shape, x.shape, -1)
    if isinstance(block, str):
        return Fail(f"{name} {value.name!r} cannot be read row by row: {block}")
    return None


def _weight(match, linear: Node, x):
    """The weight as one [K, D] matrix, or as [*G, K, D] matrices read row by row; or why not."""
    value = match["w"]
    tensor = constant_of(value)
    if tensor is None:
        return Fail(f"weight {value.name!r} is computed at run time")
    array = tensor.numpy()
    if value.dtype != x.dtype or array.ndim < 2 or (array.ndim > 2 and linear.op == Op.LINEAR):
        return Fail(f"weight {value.name!r} is not a {x.dtype} matrix")
    # linear keeps weights as [K, D]; matmul multiplies by [D, K] (or by a batch of them)
    weight_kd = array if linear.op == Op.LINEAR else np.swapaxes(array, -1, -2)
    if weight_kd.shape[-1] != x.shape[-1]:
        return Fail(f"weight {value.name!r} does not match the normalized dim {x.shape[-1]}")
    rows = weight_rows(weight_kd.shape, x.shape)
    if isinstance(rows, str):
        return Fail(f"weight {value.name!r} of shape {list(array.shape)} (as [..., K, D]): its {rows}")
    return weight_kd.reshape(weight_kd.shape[-2:]) if rows.groups == 1 else weight_kd


def _bias(match, linear: Node, y_shape: tuple):
    """The bias as one value per output feature, or as rows of them read row by row (one per
    feature), if it broadcasts so without adding dims to the output (of ``y_shape``)."""
    if linear.op == Op.LINEAR:
        value = linear.input(2)
    elif linear.op == Op.ADD:
        value = match["c"]
    else:
        return None
    if value is None:
        return None
    tensor = constant_of(value)
    if tensor is None:
        return Fail(f"bias {value.name!r} is computed at run time")
    array, k, rank = tensor.numpy(), y_shape[-1], len(y_shape)
    if array.ndim > rank:
        return Fail(f"bias {value.name!r} of shape {list(array.shape)} adds dims to the {rank}-dim output")
    if array.size == k and (not array.ndim or array.shape[-1] == k):
        return array.reshape(k)
    rows = row_broadcast(array.shape, y_shape, -1)
    if isinstance(rows, str):
        return Fail(
            f"bias {value.name!r} of shape {list(array.shape)} is not one value per output feature, "
            f"nor one row of them per block of rows: {rows}"
        )
    return array


def check_plain(match):
    return _check(match, match.root)


def check_activated(match):
    return _check(match, match.node("linear"))


def _replace(b, match, out_activation: str):
    norm_act = match.node("norm_act")
    weight = b.constant(match.info["weight"], f"{norm_act.name}_linear_weight", derived_from=[match["w"]])
    bias = match.info["bias"]
    bias_value = (
        None
        if bias is None
        else b.constant(
            bias.astype(match.info["weight"].dtype),
            f"{norm_act.name}_linear_bias",
            derived_from=[_bias_source(match)],
        )
    )
    inputs = [norm_act.input(0), norm_act.input(1), norm_act.input(2), weight, bias_value, norm_act.input(3)]
    while inputs[-1] is None:
        inputs.pop()  # (absent trailing ports are left out, as every frontend leaves them)
    node = b.node(
        Op.NORM_ACT_LINEAR,
        *inputs,
        norm=norm_act.attrs["norm"],
        activation=norm_act.attrs["activation"],
        eps=norm_act.attrs["eps"],
        out_activation=out_activation,
    )
    if len(node.outputs) == 1:
        return node.output
    # (the NormAct's residual sum, read by later layers, is the fused op's second output)
    return {match.root.output: node.outputs[0], norm_act.outputs[1]: node.outputs[1]}


def _bias_source(match):
    if "c" in match.values:
        return match["c"]
    return next((n.input(2) for n in match.matched if n.op == Op.LINEAR), None)


def replace_plain(b, match):
    return _replace(b, match, "identity")


def replace_activated(b, match):
    return _replace(b, match, activation_of(match.root).attr)


_FORMS = (("linear", linear_pattern), ("matmul_bias", matmul_bias_pattern), ("matmul", matmul_pattern))

# (external uses allowed: ``_check`` lets the residual sum alone be read elsewhere)
PASS = rewrite_pass(
    "fuse_norm_act_linear",
    "Fuse NormAct (and its residual add) + a narrow linear layer (few outputs; one matrix or one per "
    "slice; + bias, activation) into one kernel.",
    [
        *(
            Rule(
                f"fuse_norm_act_{name}_act",
                _with_activation(p),
                replace_activated,
                check_activated,
                allow_external_uses=True,
            )
            for name, p in _FORMS
        ),
        *(
            Rule(f"fuse_norm_act_{name}", p, replace_plain, check_plain, allow_external_uses=True)
            for name, p in _FORMS
        ),
    ],
)
