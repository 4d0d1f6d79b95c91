"""Batching rules: how one op of N identical chains becomes one op on a tensor with a batch axis.

A batched value is the N per-piece values stacked along ``axis``. Each rule takes the N corresponding
nodes and their operands (batched values, constants shared by every piece, or per-piece constants that
are stacked once here, at optimize time) and emits the batched op, moving the batch axis to the front
with a transpose only where an op cannot keep it where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphopt.ir import Node, Op, Value, constant_of
from graphopt.ir.ops import BINARY_POINTWISE, UNARY_POINTWISE
from graphopt.rewrite import Builder, Fail


@dataclass(frozen=True)
class Batched:
    value: Value
    axis: int  # where the batch dim is


@dataclass(frozen=True)
class Constant:
    """A constant operand: one Value per piece (the same Value, or equal values, when shared)."""

    values: tuple[Value, ...]

    @property
    def arrays(self) -> list[np.ndarray]:
        return [constant_of(v).numpy() for v in self.values]

    @property
    def shared(self) -> bool:
        first = self.values[0]
        if all(v is first for v in self.values):
            return True
        arrays = self.arrays
        return all(a.dtype == arrays[0].dtype and np.array_equal(a, arrays[0]) for a in arrays[1:])

    @property
    def rank(self) -> int:
        return len(constant_of(self.values[0]).shape)


Operand = Batched | Constant | None
Rule = Callable[[Builder, list[Node], list[Operand]], "Batched | Fail"]


def to_front(b: Builder, x: Batched) -> Batched:
    """Moves the batch axis to position 0 (a real transpose: only where an op needs it)."""
    if x.axis == 0:
        return x
    rank = x.value.rank
    perm = (x.axis, *[d for d in range(rank) if d != x.axis])
    return Batched(b.transpose(x.value, perm=perm), 0)


def move_axis(b: Builder, x: Batched, target: int) -> Value:
    if x.axis == target:
        return x.value
    dims = [d for d in range(x.value.rank) if d != x.axis]
    dims.insert(target, x.axis)
    return b.transpose(x.value, perm=tuple(dims))


def constant_operand(b: Builder, operand: Constant, piece_rank: int, axis: int, hint: str) -> Value:
    """The constant shaped to broadcast against a batched value of ``piece_rank`` + 1 dims."""
    rank = operand.rank
    if operand.shared and axis <= piece_rank - rank:
        return operand.values[0]  # the batch axis lands in broadcast padding: the constant works as is
    arrays = [a.reshape((1,) * (piece_rank - rank) + a.shape) for a in operand.arrays]
    stacked = np.expand_dims(arrays[0], axis) if operand.shared else np.stack(arrays, axis=axis)
    return b.constant(
        np.ascontiguousarray(stacked), hint, dtype=operand.values[0].dtype, derived_from=operand.values
    )


def _rank(node: Node, index: int = 0) -> int:
    return node.input(index).rank


def _unary(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    x = operands[0]
    node = nodes[0]
    return Batched(b.node(node.op, x.value, **node.attrs).output, x.axis)


def _binary(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    node = nodes[0]
    left, right = operands
    if isinstance(left, Batched) and isinstance(right, Batched):
        if _rank(node, 0) != _rank(node, 1):
            return Fail(f"{node.op} {node.name!r} broadcasts two chain values of different ranks")
        if left.axis != right.axis:
            left, right = to_front(b, left), to_front(b, right)
        return Batched(b.node(node.op, left.value, right.value).output, left.axis)
    batched_index = 0 if isinstance(left, Batched) else 1
    x = operands[batched_index]
    const = operands[1 - batched_index]
    piece_rank = _rank(node, batched_index)
    if not isinstance(const, Constant):
        return Fail(f"{node.op} {node.name!r} has no chain operand")
    if const.rank > piece_rank:
        return Fail(f"constant of {node.op} {node.name!r} has more dims than the chain value")
    other = constant_operand(b, const, piece_rank, x.axis, f"{node.name}_batched")
    inputs = (x.value, other) if batched_index == 0 else (other, x.value)
    return Batched(b.node(node.op, *inputs).output, x.axis)


def _reshape(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    node = nodes[0]
    if len(node.inputs) != 1 or "shape" not in node.attrs:
        return Fail(f"reshape {node.name!r} takes its target shape at run time")
    # With the batch axis first, each piece is a contiguous block, so prepending N reshapes every piece
    # exactly as before (ONNX's 0 = "copy this dim" keeps meaning the same dim, one position later).
    x = to_front(b, operands[0])
    return Batched(b.reshape(x.value, shape=(len(nodes), *node.attrs["shape"])), 0)


def _transpose(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    x, perm = operands[0], nodes[0].attrs["perm"]
    shifted = [p if p < x.axis else p + 1 for p in perm]
    shifted.insert(x.axis, x.axis)
    return Batched(b.transpose(x.value, perm=tuple(shifted)), x.axis)


def _squeeze(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    x, axes = operands[0], nodes[0].attrs.get("axes")
    if axes is None or len(nodes[0].inputs) != 1:
        return Fail(f"squeeze {nodes[0].name!r} has no constant axes")
    batched_axes = tuple(a if a < x.axis else a + 1 for a in axes)
    return Batched(b.squeeze(x.value, axes=batched_axes), x.axis - sum(a < x.axis for a in axes))


def _unsqueeze(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    x, axes = operands[0], nodes[0].attrs.get("axes")
    if axes is None or len(nodes[0].inputs) != 1:
        return Fail(f"unsqueeze {nodes[0].name!r} has no constant axes")
    rank = _rank(nodes[0])
    kept = [i for i in range(rank + len(axes)) if i not in axes]
    batch = kept[x.axis] if x.axis < rank else rank + len(axes)
    batched_axes = tuple(a if a < batch else a + 1 for a in axes)
    return Batched(b.unsqueeze(x.value, axes=batched_axes), batch)


def _norm(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    node = nodes[0]
    axis, rank = node.attrs["axis"], _rank(node)
    x = operands[0]
    if x.axis > axis:
        x = to_front(b, x)  # the batch axis must stay out of the normalized dims
    scale, bias = ([*operands[1:], None, None])[:2]
    # Shared weights stay inside the norm; per-piece ones are stacked and applied after it (and a
    # bias can only stay inside when the scale does).
    inline_scale = scale is None or scale.shared
    inline_bias = inline_scale and (bias is None or bias.shared)
    inputs = [
        scale.values[0] if scale is not None and inline_scale else None,
        bias.values[0] if bias is not None and inline_bias else None,
    ]
    while inputs and inputs[-1] is None:
        inputs.pop()
    out = b.node(node.op, x.value, *inputs, axis=axis + 1, eps=node.attrs["eps"]).output
    if scale is not None and not inline_scale:
        out = b.mul(out, constant_operand(b, scale, rank, x.axis, f"{node.name}_scale"))
    if bias is not None and not inline_bias:
        out = b.add(out, constant_operand(b, bias, rank, x.axis, f"{node.name}_bias"))
    return Batched(out, x.axis)


def _matmul(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    node = nodes[0]
    left, right = operands
    rank = _rank(node, 0)
    if isinstance(left, Constant):
        return Fail(f"matmul {node.name!r} multiplies a constant by the chain value")
    if isinstance(right, Batched):
        if _rank(node, 1) != rank or rank < 2:
            return Fail(f"matmul {node.name!r} of two chain values with ranks {rank}, {_rank(node, 1)}")
        left, right = to_front(b, left), to_front(b, right)
        return Batched(b.matmul(left.value, right.value), 0)
    if right.rank != 2:
        return Fail(f"matmul {node.name!r} has a weight of rank {right.rank}")
    if right.shared:
        if rank == 1 or left.axis > rank - 2:
            left = to_front(b, left)
        return Batched(b.matmul(left.value, right.values[0]), left.axis)
    if rank < 2:
        return Fail(f"matmul {node.name!r} of a vector by per-piece weights")
    left = to_front(b, left)
    stacked = np.stack(right.arrays).reshape((len(nodes),) + (1,) * (rank - 2) + right.arrays[0].shape)
    weight = b.constant(
        stacked, f"{node.name}_weights", dtype=right.values[0].dtype, derived_from=right.values
    )
    return Batched(b.matmul(left.value, weight), 0)


def _linear(b: Builder, nodes: list[Node], operands: list[Operand]) -> Batched | Fail:
    node = nodes[0]
    x, weight, bias = (list(operands) + [None])[:3]
    rank = _rank(node)
    if not isinstance(weight, Constant) or (bias is not None and not isinstance(bias, Constant)):
        return Fail(f"linear {node.name!r} has run-time weights")
    if weight.shared and (bias is None or bias.shared):
        if x.axis == rank:
            x = to_front(b, x)
        inputs = [weight.values[0]] + ([bias.values[0]] if bias is not None else [])
        return Batched(b.linear(x.value, *inputs), x.axis)
    if rank < 2:
        return Fail(f"linear {node.name!r} of a vector by per-piece weights")
    x = to_front(b, x)
    transposed = np.stack([w.T for w in weight.arrays]).reshape(
        (len(nodes),) + (1,) * (rank - 2) + weight.arrays[0].T.shape
    )
    out = b.matmul(
        x.value,
        b.constant(
            np.ascontiguousarray(transposed),
            f"{node.name}_weights",
            dtype=weight.values[0].dtype,
            derived_from=weight.values,
        ),
    )
    if bias is not None:
        out = b.add(out, constant_operand(b, bias, rank, 0, f"{node.name}_bias"))
    return Batched(out, 0)


RULES: dict[str, Rule] = {
    **dict.fromkeys(UNARY_POINTWISE | {Op.CAST, Op.IDENTITY}, _unary),
    **dict.fromkeys(BINARY_POINTWISE, _binary),
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _squeeze,
    Op.UNSQUEEZE: _unsqueeze,
    Op.LAYER_NORM: _norm,
    Op.RMS_NORM: _norm,
    Op.MATMUL: _matmul,
    Op.LINEAR: _linear,
}
BATCHABLE = frozenset(RULES)
