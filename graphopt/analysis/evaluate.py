"""Evaluating canonical ops on constant NumPy arrays (for constant folding).

Integer division truncates toward zero, as in ONNX. Ops not listed here are evaluated by the frontend
that loaded them (``graph.meta["evaluate"]``), or not at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir import Node, Op
from ..ir.infer import reshape_shape
from . import embedding_bag, jagged_bag

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _wide(f: Callable) -> Callable:
    """``f`` computed in float64 from narrower float inputs (``evaluate`` rounds the result to the
    output's type): NumPy's float32 exp and tanh are not correctly rounded (SIMD builds miss by an ulp on
    many inputs), and a folded constant must be no farther from the exact value than the runtime's own
    result. Diffusers' timestep embedding, ``sin(t * exp(-k * arange(128)))`` at t near 1e6, turns one
    ulp of a frequency into an error the numeric check refused."""

    def widened(node, *arrays):
        return f(node, *(a.astype(np.float64) if _narrow_float(a) else a for a in arrays))

    return widened


def _narrow_float(array) -> bool:
    array = np.asarray(array)
    return np.issubdtype(array.dtype, np.floating) and array.dtype.itemsize < 8


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


def _reshape(node, x):
    return x.reshape(reshape_shape(x.shape, tuple(node.attrs["shape"])))


def _slice(node, x):
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(
        *(node.attrs[k] for k in ("axes", "starts", "ends", "steps")), strict=True
    ):
        index[axis] = slice(start, end, step)
    return x[tuple(index)]


def _split(node, x):
    bounds = np.cumsum(node.attrs["sizes"])[:-1]
    return tuple(np.split(x, bounds, axis=node.attrs["axis"]))


def _reduce_mean(node, x):
    return x.mean(axis=tuple(node.attrs["axes"]), keepdims=node.attrs.get("keepdims", True))


def _shape(node, x):
    return np.asarray(x.shape[node.attrs.get("start", 0) : node.attrs.get("end")], dtype=np.int64)


_EVALUATORS: dict[str, Callable] = {
    Op.IDENTITY: lambda n, x: x,
    Op.RELU: lambda n, x: np.maximum(x, 0),
    Op.TANH: lambda n, x: np.tanh(x),
    Op.SIGMOID: lambda n, x: 1 / (1 + np.exp(-x)),
    Op.EXP: lambda n, x: np.exp(x),
    Op.NEG: lambda n, x: -x,
    Op.SQRT: lambda n, x: np.sqrt(x),
    Op.RSQRT: lambda n, x: 1 / np.sqrt(x),
    Op.RECIPROCAL: lambda n, x: 1 / x,
    Op.ERF: lambda n, x: _erf(x),
    Op.ADD: lambda n, a, b: a + b,
    Op.SUB: lambda n, a, b: a - b,
    Op.MUL: lambda n, a, b: a * b,
    Op.DIV: lambda n, a, b: _div(a, b),
    Op.POW: lambda n, a, b: np.power(a, b),
    Op.LESS: lambda n, a, b: np.less(a, b),
    Op.WHERE: lambda n, c, x, y: np.where(c, x, y),
    Op.MATMUL: lambda n, a, b: a @ b,
    Op.CAST: lambda n, x: x.astype(n.attrs["to"].numpy),
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: lambda n, x: np.transpose(x, n.attrs["perm"]),
    Op.SQUEEZE: lambda n, x: np.squeeze(x, axis=tuple(n.attrs["axes"])),
    Op.UNSQUEEZE: lambda n, x: np.expand_dims(x, tuple(n.attrs["axes"])),
    Op.CONCAT: lambda n, *xs: np.concatenate(xs, axis=n.attrs["axis"]),
    Op.STACK: lambda n, *xs: np.stack(xs, axis=n.attrs["axis"]),
    Op.GATHER: lambda n, x, i: np.take(x, i, axis=n.attrs["axis"]),
    Op.SLICE: _slice,
    Op.SPLIT: _split,
    Op.REDUCE_MEAN: _reduce_mean,
    Op.EMBEDDING_BAG: embedding_bag.evaluate,
    Op.JAGGED_BAG: jagged_bag.evaluate,
    Op.SHAPE: _shape,
    Op.CONSTANT: lambda n: n.attrs["value"].numpy(),
}

# Ops evaluated here in float64 and rounded once, rather than by a frontend's own evaluator (ONNX's
# reference, torch), which computes them in the value's type and misses the nearest value by an ulp.
CORRECTLY_ROUNDED = frozenset({Op.TANH, Op.SIGMOID, Op.EXP, Op.RSQRT, Op.ERF, Op.POW})
_EVALUATORS.update({op: _wide(_EVALUATORS[op]) for op in CORRECTLY_ROUNDED})

# The form of each op these evaluators understand: the canonical one, with attributes, not tensor inputs.
_NEEDS_ATTRS = {
    Op.RESHAPE: "shape",
    Op.SLICE: "starts",
    Op.SPLIT: "sizes",
    Op.SQUEEZE: "axes",
    Op.UNSQUEEZE: "axes",
}
_NEEDS_ATTRS |= {Op.REDUCE_MEAN: "axes", Op.TRANSPOSE: "perm"}


def can_evaluate(node: Node) -> bool:
    if node.op not in _EVALUATORS:
        return False
    needed = _NEEDS_ATTRS.get(node.op)
    return needed is None or (needed in node.attrs and (node.op in (Op.TRANSPOSE,) or len(node.inputs) == 1))


def evaluate(node: Node, arrays: list[np.ndarray]) -> list[np.ndarray]:
    result = _EVALUATORS[node.op](node, *arrays)
    results = list(result) if isinstance(result, tuple) else [result]
    return [
        np.asarray(r, dtype=v.dtype.numpy) if v.dtype is not None else np.asarray(r)
        for r, v in zip(results, node.outputs, strict=True)
    ]
