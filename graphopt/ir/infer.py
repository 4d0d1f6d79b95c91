"""Output dtype and shape of the canonical ops, from their inputs and attributes.

Used when a pass creates a node (so it never has to spell out shapes) and by verify(), which checks
that recorded shapes agree with these rules. Dims stay symbolic where they are: "batch" in, "batch" out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from graphopt.fused.registry import by_ir_op
from graphopt.fused.spec import FusedOp

from .core_types import Dim, GraphError, Shape
from .dtypes import DType
from .ops import BINARY_POINTWISE, UNARY_POINTWISE, Op

if TYPE_CHECKING:
    from .graph import Node

OutputType = tuple[DType | None, Shape | None]


def infer_outputs(node: Node) -> list[OutputType]:
    rule = _RULES.get(node.op)
    if rule is None:
        fused = by_ir_op(node.op)
        if fused is not None:
            return _fused(fused, node)
        raise GraphError(f"no shape rule for {node.op!r}: give its outputs' types explicitly")
    return rule(node)


def broadcast(a: Shape | None, b: Shape | None) -> Shape | None:
    """NumPy broadcasting over possibly symbolic dims."""
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(_broadcast_dim(x, y) for x, y in zip(a, b, strict=True))


def _broadcast_dim(x: Dim, y: Dim) -> Dim:
    if x == y:
        return x
    if x == 1:
        return y
    if y == 1:
        return x
    if isinstance(x, int) and isinstance(y, int):
        raise GraphError(f"dims {x} and {y} do not broadcast")
    if isinstance(x, int):
        return x
    if isinstance(y, int):
        return y
    return None


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise GraphError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _x(node: Node, i: int = 0):
    value = node.input(i)
    if value is None:
        raise GraphError(f"{node.op} {node.name!r}: input {i} is missing")
    return value


def _same(node: Node) -> list[OutputType]:
    x = _x(node)
    return [(x.dtype, x.shape)]


def _binary(node: Node) -> list[OutputType]:
    a, b = _x(node, 0), _x(node, 1)
    return [(a.dtype or b.dtype, broadcast(a.shape, b.shape))]


def _less(node: Node) -> list[OutputType]:
    return [(DType.BOOL, broadcast(_x(node, 0).shape, _x(node, 1).shape))]


def _where(node: Node) -> list[OutputType]:
    condition, x, y = _x(node, 0), _x(node, 1), _x(node, 2)
    return [(x.dtype or y.dtype, broadcast(condition.shape, broadcast(x.shape, y.shape)))]


def _cast(node: Node) -> list[OutputType]:
    return [(node.attrs["to"], _x(node).shape)]


def _reshape(node: Node) -> list[OutputType]:
    x = _x(node)
    if "shape" not in node.attrs:
        target = node.input(1)
        if target is None or target.const is None:
            rank = target.shape[0] if target is not None and target.shape else None
            return [(x.dtype, None if not isinstance(rank, int) else (None,) * rank)]
        spec = tuple(int(d) for d in target.const.numpy().reshape(-1))
    else:
        spec = tuple(node.attrs["shape"])
    return [(x.dtype, reshape_shape(x.shape, spec))]


def reshape_shape(shape: Shape | None, spec: tuple[int, ...]) -> Shape:
    """ONNX/torch reshape: 0 copies the input's dim (ONNX), -1 takes what is left."""
    out: list[Dim] = [
        shape[i] if d == 0 and shape is not None and i < len(shape) else d for i, d in enumerate(spec)
    ]
    if -1 in out:
        where = out.index(-1)
        if shape is None:
            out[where] = None
        else:
            # A dim copied with 0 is the input's own, known or not: it cancels out of both sides.
            copied = {i for i, d in enumerate(spec) if d == 0 and i < len(shape)}
            kept = [d for i, d in enumerate(shape) if i not in copied]
            others = [d for i, d in enumerate(out) if i != where and i not in copied]
            out[where] = _inferred_dim(tuple(kept), others)
    return tuple(None if d == 0 and shape is None else d for d in out)


def _inferred_dim(shape: Shape, others: list[Dim]) -> int | None:
    """What -1 stands for: the input's size over the other dims', where a symbolic dim the output keeps
    (copied with 0, or named again) cancels out: [s, 1, 4, 3] → [s, 1, -1] gives 12."""
    symbols = Counter(d for d in shape if isinstance(d, str))
    total = None if None in shape else math.prod(d for d in shape if not isinstance(d, str))
    rest = 1
    for d in others:
        if isinstance(d, int):
            rest *= d
        elif isinstance(d, str) and symbols[d] > 0:
            symbols[d] -= 1
        else:
            return None
    if total is None or any(symbols.values()) or rest <= 0 or total % rest:
        return None
    return total // rest


def _transpose(node: Node) -> list[OutputType]:
    x = _x(node)
    perm = node.attrs["perm"]
    return [(x.dtype, None if x.shape is None else tuple(x.shape[p] for p in perm))]


def _squeeze(node: Node) -> list[OutputType]:
    x = _x(node)
    if x.shape is None:
        return [(x.dtype, None)]
    axes = {normalize_axis(a, len(x.shape)) for a in node.attrs["axes"]}
    return [(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


def _unsqueeze(node: Node) -> list[OutputType]:
    x = _x(node)
    if x.shape is None:
        return [(x.dtype, None)]
    rank = len(x.shape) + len(node.attrs["axes"])
    axes = sorted(normalize_axis(a, rank) for a in node.attrs["axes"])
    dims = list(x.shape)
    for a in axes:
        dims.insert(a, 1)
    return [(x.dtype, tuple(dims))]


def _split(node: Node) -> list[OutputType]:
    x = _x(node)
    sizes = node.attrs["sizes"]
    if x.shape is None:
        return [(x.dtype, None)] * len(sizes)
    axis = normalize_axis(node.attrs["axis"], len(x.shape))
    return [(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1 :]) for s in sizes]


def _slice(node: Node) -> list[OutputType]:
    x = _x(node)
    if x.shape is None:
        return [(x.dtype, None)]
    dims = list(x.shape)
    for axis, start, end, step in zip(
        node.attrs["axes"], node.attrs["starts"], node.attrs["ends"], node.attrs["steps"], strict=True
    ):
        axis = normalize_axis(axis, len(dims))
        size = dims[axis]
        dims[axis] = len(range(*slice(start, end, step).indices(size))) if isinstance(size, int) else None
    return [(x.dtype, tuple(dims))]


def _gather(node: Node) -> list[OutputType]:
    data, indices = _x(node, 0), _x(node, 1)
    if data.shape is None or indices.shape is None:
        return [(data.dtype, None)]
    axis = normalize_axis(node.attrs["axis"], len(data.shape))
    return [(data.dtype, data.shape[:axis] + indices.shape + data.shape[axis + 1 :])]


def _concat(node: Node) -> list[OutputType]:
    parts = [_x(node, i) for i in range(len(node.inputs))]
    if any(p.shape is None for p in parts):
        return [(parts[0].dtype, None)]
    rank = len(parts[0].shape)
    if any(len(p.shape) != rank for p in parts):
        raise GraphError(f"concat {node.name!r} joins tensors of ranks {[len(p.shape) for p in parts]}")
    axis = normalize_axis(node.attrs["axis"], rank)
    sizes = [p.shape[axis] for p in parts]
    total = sum(sizes) if all(isinstance(d, int) for d in sizes) else None
    dims = list(parts[0].shape)
    dims[axis] = total
    return [(parts[0].dtype, tuple(dims))]


def _stack(node: Node) -> list[OutputType]:
    first = _x(node)
    if first.shape is None:
        return [(first.dtype, None)]
    axis = normalize_axis(node.attrs["axis"], len(first.shape) + 1)
    return [(first.dtype, first.shape[:axis] + (len(node.inputs),) + first.shape[axis:])]


def _reduce_mean(node: Node) -> list[OutputType]:
    x = _x(node)
    if x.shape is None:
        return [(x.dtype, None)]
    axes = {normalize_axis(a, len(x.shape)) for a in node.attrs["axes"]}
    keep = node.attrs.get("keepdims", True)
    dims = [1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes]
    return [(x.dtype, tuple(dims))]


def _var_mean(node: Node) -> list[OutputType]:
    reduced = _reduce_mean(node)[0]
    return [reduced, reduced]


def _matmul(node: Node) -> list[OutputType]:
    a, b = _x(node, 0), _x(node, 1)
    if a.shape is None or b.shape is None:
        return [(a.dtype, None)]
    sa, sb = list(a.shape), list(b.shape)
    if len(sa) == 1 or len(sb) == 1:
        if len(sa) == 1 and len(sb) == 1:
            return [(a.dtype, ())]
        if len(sa) == 1:
            return [(a.dtype, tuple(sb[:-2] + sb[-1:]))]
        return [(a.dtype, tuple(sa[:-1]))]
    batch = broadcast(tuple(sa[:-2]), tuple(sb[:-2]))
    return [(a.dtype, (*batch, sa[-2], sb[-1]))]


def _linear(node: Node) -> list[OutputType]:
    x, weight = _x(node, 0), _x(node, 1)
    if x.shape is None or weight.shape is None:
        return [(x.dtype, None)]
    return [(x.dtype, (*x.shape[:-1], weight.shape[0]))]


def _embedding_bag(node: Node) -> list[OutputType]:
    """Bags of indices [..., L] into a table [V, D] pool to [..., D] (graphopt/analysis/embedding_bag.py)."""
    table, indices = node.input(0), node.input(1)
    if table.shape is None or indices.shape is None:
        return [(table.dtype, None)]
    return [(table.dtype, tuple(indices.shape[:-1]) + (table.shape[1],))]


def _jagged_bag(node: Node) -> list[OutputType]:
    """N features' variable-size bags pool to [N, B, D], B their offsets' count (one fewer with the last
    offset included) (graphopt/analysis/jagged_bag.py)."""
    table, n = node.input(0), len(node.attrs["counts"])
    offsets = node.input(2 + n)
    if table.shape is None or offsets is None or offsets.shape is None:
        return [(table.dtype, None)]
    bags = offsets.shape[0]
    if isinstance(bags, int):
        bags -= bool(node.attrs["last_offset"])
    elif node.attrs["last_offset"]:
        bags = None
    return [(table.dtype, (n, bags, table.shape[1]))]


def _fused(op: FusedOp, node: Node) -> list[OutputType]:
    """A fused op's outputs: its spec's shape rule; every output has X's dtype."""
    inputs = [node.input(i) for i in range(len(op.inputs))]
    shapes = [None if v is None else v.shape for v in inputs]
    dtype = _x(node).dtype
    return [(dtype, shape) for shape in op.shape_rule([v is not None for v in inputs], shapes)]


def _shape(node: Node) -> list[OutputType]:
    x = _x(node)
    if x.shape is None:
        return [(DType.INT64, (None,))]
    return [(DType.INT64, (len(range(len(x.shape))[node.attrs.get("start", 0) : node.attrs.get("end")]),))]


def _constant(node: Node) -> list[OutputType]:
    tensor = node.attrs["value"]
    return [(tensor.dtype, tensor.shape)]


_RULES: dict[str, Callable[[Node], list[OutputType]]] = {
    **dict.fromkeys(
        UNARY_POINTWISE | {Op.IDENTITY, Op.LAYER_NORM, Op.RMS_NORM, Op.GROUP_NORM, Op.INSTANCE_NORM}, _same
    ),
    **dict.fromkeys(BINARY_POINTWISE, _binary),
    Op.LESS: _less,
    Op.WHERE: _where,
    Op.CAST: _cast,
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _squeeze,
    Op.UNSQUEEZE: _unsqueeze,
    Op.SPLIT: _split,
    Op.SLICE: _slice,
    Op.GATHER: _gather,
    Op.CONCAT: _concat,
    Op.STACK: _stack,
    Op.REDUCE_MEAN: _reduce_mean,
    Op.VAR_MEAN: _var_mean,
    Op.EMBEDDING_BAG: _embedding_bag,
    Op.JAGGED_BAG: _jagged_bag,
    Op.MATMUL: _matmul,
    Op.LINEAR: _linear,
    Op.CONSTANT: _constant,
    Op.SHAPE: _shape,
}
