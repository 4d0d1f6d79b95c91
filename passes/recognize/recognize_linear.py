"""recognize_linear: a matmul by a transposed [K, D] matrix, plus a bias, becomes one ``linear``.

torch.export writes nn.Linear as ``linear`` until ``run_decompositions()``, and then as
``addmm(b, x, permute(W))`` (which the frontend reads as matmul + add), with views around it for
inputs of rank 3 and more: ``view(addmm(b, view(x, [M, D]), permute(W)), [..., K])``. ONNX graphs with a
Transpose before their MatMul have the same shape. After this pass every frontend's nn.Linear is the
same node, so fusion rules match it once.

A MatMul by a [D, K] constant with no transpose (how ONNX exporters write nn.Linear) stays as it is:
as a linear it would only have to be transposed back when written out.
"""

from __future__ import annotations

from graphopt.ir import Value
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

from .origin import note_origin


def matmul_pattern(x, w):
    return op.matmul(x, op.transpose(w).named("transpose"))


def check_matmul(match):
    if match.node("transpose").attrs.get("perm") != (1, 0):
        return None  # a batched transpose (attention's k.T): not a weight matrix
    x, w = match["x"], match["w"]
    if x.rank is None:
        return Fail(f"rank of {x.name!r} is unknown")
    if x.dtype != w.dtype:
        return Fail(f"{x.name!r} is {x.dtype} but the weight {w.name!r} is {w.dtype}")
    return match


def replace_matmul(b, match):
    return b.linear(match["x"], match["w"])


def bias_pattern(x, w, c):
    return op.add(op.linear(x, w).named("linear"), c)


def check_bias(match):
    w, c = match["w"], match["c"]
    if c.rank != 1:
        return None  # a residual or another full-size tensor, not a bias
    out_features = w.shape[0] if w.shape is not None else None
    if c.shape[0] != out_features or out_features is None:
        return Fail(f"{c.name!r} has shape {list(c.shape)}, not [{out_features}] like a bias of {w.name!r}")
    if c.dtype != match["x"].dtype:
        return Fail(f"bias {c.name!r} is {c.dtype} but {match['x'].name!r} is {match['x'].dtype}")
    return match


def replace_bias(b, match):
    return b.linear(match["x"], match["w"], match["c"])


def flattened_pattern(x, w):
    return op.reshape(op.linear(op.reshape(x).named("flatten"), w, ...).named("linear"))


def check_flattened(match):
    x, flatten, linear = match["x"], match.node("flatten").output, match.node("linear")
    restored = match.root.output
    if _unknown(x) or _unknown(flatten) or _unknown(restored):
        return Fail(f"the shapes around {linear.name!r} are not fully known")
    if flatten.rank != 2 or x.rank < 2 or flatten.shape[1] != x.shape[-1]:
        shape = list(flatten.shape)
        return Fail(f"{flatten.name!r} {shape} does not flatten the leading dims of {x.name!r}")
    if tuple(restored.shape) != (*x.shape[:-1], linear.output.shape[-1]):
        shape = list(restored.shape)
        return Fail(f"{restored.name!r} {shape} does not restore the leading dims of {x.name!r}")
    return match


def replace_flattened(b, match):
    bias = match.node("linear").input(2)
    inputs = (match["x"], match["w"]) + ((bias,) if bias is not None else ())
    return b.linear(*inputs)


def _unknown(value: Value) -> bool:
    return value.shape is None or any(d is None for d in value.shape)


PASS = rewrite_pass(
    "recognize_linear",
    "Turn matmul by a transposed weight (+ bias, in flattening views) into one linear op.",
    [
        Rule("linear_from_transposed_matmul", matmul_pattern, replace_matmul, check_matmul),
        Rule("linear_bias", bias_pattern, replace_bias, check_bias),
        Rule("linear_through_flatten", flattened_pattern, replace_flattened, check_flattened),
    ],
    on_rewrite=note_origin,
)
