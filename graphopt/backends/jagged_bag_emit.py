"""``Op.JAGGED_BAG`` (graphopt/analysis/jagged_bag.py) written out: as ONNX nodes and as aten calls.

Both forms look every feature's indices up at once: each index is checked against its own table and
moved to that table's rows of the concatenated one (one outside is moved past its end, where the
runtime's bounds check fails as it did on the original lookup), then one pooling.

aten ("torch" form): the indices concatenated, each feature's offsets moved by the number of indices
before it, and one ``_embedding_bag`` over all N·B bags, the kernel ``nn.EmbeddingBag`` runs: each
bag's rows summed in the same order as on its own, so the result is the original's, bit for bit.
About a dozen kernels whatever N (the original: one ``_embedding_bag`` per feature).

ONNX (the exporters' forms): ONNX has no pooling of bags of different sizes, and each exporter wrote
a Loop of one iteration per bag (B iterations of 10 to 20 nodes, per feature). Here, with no Loop: every
bag's [start, end) as the Loop's ``Slice`` reads it, the positions of all bags' indices enumerated
(a running sum of the bags' sizes; each position's bag by a ``ScatterElements`` add of bag ends and a
running sum), one ``Gather`` of their rows and one ``ScatterND`` add of the rows into their bags. About
sixty small nodes whatever N and B. ONNX Runtime's CPU ScatterND adds the rows one after another, in
the order ReduceSum sums them in the Loop, so sums are the original's bit for bit (a bag of rows that
are all -0.0 gives +0.0); its CUDA kernel adds them atomically, in no set order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from onnx import helper

from ..analysis.jagged_bag import ONNX_OPSET, features
from ..ir import DType, GraphError, Node

if TYPE_CHECKING:
    from .fx_build import FxBuilder
    from .onnx_emit import Emitter

aten = torch.ops.aten
_TORCH_MODES = {"sum": 0, "mean": 1}


def parts(node: Node):
    """(table, bounds, indices, offsets, weights or None) of a jagged_bag node."""
    n = features(node)
    indices, offsets, weights = (node.inputs[2 + i * n : 2 + (i + 1) * n] for i in range(3))
    return node.input(0), node.input(1), indices, offsets, weights or None


def bag_count(node: Node) -> int:
    return node.input(2 + features(node)).shape[0] - bool(node.attrs["last_offset"])


# ----- aten -------------------------------------------------------------------------------------


def emit_aten(b: FxBuilder, node: Node) -> list:
    table, bounds, indices, offsets, weights = parts(node)
    name, n, bags, last = node.output.name, features(node), bag_count(node), node.attrs["last_offset"]
    total = sum(node.attrs["counts"])
    limits = b.arg(bounds)  # [N, 4]: rows, first row, first index, index count

    def column(i, keep=False):
        picked = b.call(aten.slice.Tensor, (limits, 1, i, i + 1), name=f"{name}_bound{i}")
        return picked if keep else b.call(aten.view.default, (picked, [n]), name=f"{name}_bounds{i}")

    ids = b.call(aten.cat.default, ([b.arg(v) for v in indices], 0), name=f"{name}_indices")
    # Each index's feature's (rows, first row): the N pairs repeated by the features' index counts.
    pairs = b.call(aten.slice.Tensor, (limits, 1, 0, 2), name=f"{name}_pairs")
    repeat = aten.repeat_interleave.self_Tensor
    each = b.call(repeat, (pairs, column(3), 0), {"output_size": total}, name=f"{name}_per_index")
    size = b.call(aten.select.int, (each, 1, 0), name=f"{name}_rows")
    first = b.call(aten.select.int, (each, 1, 1), name=f"{name}_first")
    past_end = table.shape[0]
    inside = b.call(aten.lt.Tensor, (ids, size), name=f"{name}_inside")
    moved = b.call(aten.add.Tensor, (ids, first), name=f"{name}_moved")
    moved = b.call(aten.where.ScalarOther, (inside, moved, past_end), name=f"{name}_checked")
    negative = b.call(aten.lt.Scalar, (ids, 0), name=f"{name}_negative")
    moved = b.call(aten.where.ScalarSelf, (negative, past_end, moved), name=f"{name}_mapped")

    starts = b.call(aten.stack.default, ([b.arg(v) for v in offsets], 0), name=f"{name}_offsets")
    if last:  # (the last offset of each feature is where the next feature's first bag starts)
        starts = b.call(aten.slice.Tensor, (starts, 1, 0, bags), name=f"{name}_starts")
    starts = b.call(aten.add.Tensor, (starts, column(2, keep=True)), name=f"{name}_shifted")
    starts = b.call(aten.view.default, (starts, [n * bags]), name=f"{name}_bag_starts")
    scale = None
    if weights is not None:
        scale = b.call(aten.cat.default, ([b.arg(v) for v in weights], 0), name=f"{name}_weights")
    mode = _TORCH_MODES[node.attrs["mode"]]
    args = (b.arg(table), moved, starts, False, mode, False, scale, False, -1)
    pooled = b.getitem(b.call(aten._embedding_bag.default, args, name=f"{name}_bag"), 0, f"{name}_pooled")
    return [b.call(aten.view.default, (pooled, [n, bags, table.shape[1]]), name=name)]


# ----- ONNX -------------------------------------------------------------------------------------


class _Writer:
    """Nodes named after the jagged_bag node, one output each."""

    def __init__(self, e: Emitter, node: Node):
        self.e, self.name = e, node.name

    def __call__(self, op_type: str, *inputs, hint: str = "", out: str | None = None, **attrs) -> str:
        out = out or self.e.temp(f"{self.name}_{hint or op_type.lower()}")
        self.e.node(op_type, list(inputs), [out], name=out, **attrs)
        return out

    def const(self, values, hint: str, dtype=np.int64) -> str:
        return self.e.const(np.asarray(values, dtype=dtype), f"{self.name}_{hint}")

    def axes(self, op_type: str, x: str, axes: list[int], hint: str) -> str:
        if self.e.opset >= 13:
            return self(op_type, x, self.const(axes, f"{hint}_axes"), hint=hint)
        return self(op_type, x, hint=hint, axes=axes)

    def take(self, x: str, start: int, end: int, axis: int, hint: str) -> str:
        return self("Slice", x, self.const([start], f"{hint}_from"), self.const([end], f"{hint}_to"),
                    self.const([axis], f"{hint}_axis"), hint=hint)  # fmt: skip

    def filled(self, shape: str, value, dtype: DType, hint: str) -> str:
        fill = helper.make_tensor("value", dtype.onnx, [1], [value])
        return self("ConstantOfShape", shape, hint=hint, value=fill)


def emit_onnx(e: Emitter, node: Node) -> None:
    if e.opset < ONNX_OPSET:  # (batch_embedding_bags pools these bags only from that opset on)
        raise GraphError(f"{node.name}: {node.op} needs ONNX opset {ONNX_OPSET}, the model has {e.opset}")
    table, _, indices, offsets, weights = parts(node)
    w = _Writer(e, node)
    n, bags, form, last = features(node), bag_count(node), node.attrs["form"], node.attrs["last_offset"]
    counts = list(node.attrs["counts"])
    total, slots, width = sum(counts), n * bags, table.shape[1]
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    zero, one = w.const(0, "zero"), w.const(1, "one")
    count = w.const(np.reshape(counts, (n, 1)), "counts")

    def as_int64(value, hint):
        return value.name if value.dtype is DType.INT64 else w("Cast", value, hint=hint, to=DType.INT64.onnx)

    # Each bag's [start, end) among its feature's indices, as the Loop's Slice reads the offsets.
    edges = w("Concat", *(as_int64(v, "offset") for v in offsets), hint="offsets", axis=0)
    edges = w("Reshape", edges, w.const([n, bags + last], "edges_shape"), hint="edges")
    raw_starts = w.take(edges, 0, bags, 1, "raw_starts") if last else edges
    ends = (
        w.take(edges, 1, bags + 1, 1, "raw_ends")
        if last
        else w("Concat", w.take(edges, 1, bags, 1, "next_starts"), count, hint="raw_ends", axis=1)
    )

    def clamped(x, hint):
        wrapped = w("Where", w("Less", x, zero), w("Add", x, count), x, hint=f"{hint}_wrapped")
        return w("Min", w("Max", wrapped, zero), count, hint=hint)

    starts, ends = clamped(raw_starts, "starts"), clamped(ends, "ends")
    sizes = w("Max", w("Sub", ends, starts), zero, hint="sizes")  # [N, B]
    flat = w.const([slots], "slots")
    lengths = w("Reshape", sizes, flat, hint="lengths")
    begins = w("Reshape", w("Add", starts, w.const(firsts.reshape(n, 1), "firsts")), flat, hint="begins")

    # Positions of all bags' indices, bag after bag: position j of bag b is j - (sizes before b) + begin.
    ends_at = w("CumSum", lengths, zero, hint="ends_at")
    held = w.take(ends_at, slots - 1, slots, 0, "held")  # [1]: the indices the bags hold
    marks = w.filled(w("Add", held, one), 0, DType.INT64, "marks")
    ones = w.filled(flat, 1, DType.INT64, "ones")
    marks = w("ScatterElements", marks, ends_at, ones, hint="bag_ends", axis=0, reduction="add")
    # [held]: each position's bag (the bags ending at or before it, empty ones included)
    bag = w("Slice", w("CumSum", marks, zero, hint="bag_running"), w.const([0], "bag_from"), held, hint="bag")
    steps = w("Range", zero, w.axes("Squeeze", held, [0], "held_scalar"), one, hint="steps")
    shift = w("Sub", w("Add", begins, lengths), ends_at, hint="shift")
    positions = w("Add", steps, w("Gather", shift, bag, axis=0), hint="positions")

    # Each index moved to its feature's rows of the table (the feature by a running sum of firsts).
    starts_at = w.filled(w.const([total + 1], "index_slots"), 0, DType.INT64, "feature_marks")
    firsts_after = w.const(firsts[1:], "later_firsts")
    starts_at = w("ScatterElements", starts_at, firsts_after, w.const(np.ones(n - 1), "later_ones"),
                  hint="feature_starts", axis=0, reduction="add")  # fmt: skip
    feature = w("Slice", w("CumSum", starts_at, zero, hint="feature_running"), w.const([0], "feature_from"),
                w.const([total], "feature_to"), hint="feature")  # fmt: skip
    # [T, 4]: each index's feature's bounds (rows of its table, first row, ...)
    layout = w("Gather", node.input(1).name, feature, hint="layout", axis=0)
    rows = w("Gather", layout, zero, hint="rows_of", axis=1)
    first = w("Gather", layout, one, hint="first_of", axis=1)
    ids = w("Concat", *(as_int64(v, "index") for v in indices), hint="indices", axis=0)
    ids = w("Where", w("Less", ids, zero), w("Add", ids, rows), ids, hint="wrapped")  # (Gather's -V..-1)
    past_end = w.const(table.shape[0], "past_end")
    moved = w("Where", w("Less", ids, rows), w("Add", ids, first), past_end, hint="moved")
    moved = w("Where", w("Less", ids, zero), past_end, moved, hint="mapped")

    scale = None
    if weights is not None:
        scale = w("Concat", *(v.name for v in weights), hint="weights", axis=0)
    if form == "onnx_loop":  # (the Loop looks up only the bags' indices)
        held_ids = w("Gather", moved, positions, hint="bag_ids", axis=0)
        picked = w("Gather", table.name, held_ids, hint="rows", axis=0)
        if scale is not None:
            held_weights = w("Gather", scale, positions, hint="bag_weights", axis=0)
            picked = w("Mul", picked, w.axes("Unsqueeze", held_weights, [1], "factor"), hint="weighted")
    else:  # (dynamo's graph looks every index up first, scales the rows, then slices the bags out)
        looked_up = w("Gather", table.name, moved, hint="all_rows", axis=0)
        if scale is not None:
            looked_up = w("Mul", looked_up, w.axes("Unsqueeze", scale, [1], "factor"), hint="weighted")
        picked = w("Gather", looked_up, positions, hint="rows", axis=0)
    into = w.filled(w.const([slots, width], "pooled_shape"), 0, table.dtype, "zeros")
    slot = w.axes("Unsqueeze", bag, [1], "slot")
    pooled = w("ScatterND", into, slot, picked, hint="sums", reduction="add")
    if node.attrs["mode"] == "mean":
        pooled = w("Div", pooled, _divisors(w, node, sizes, raw_starts, count, table.dtype), hint="means")
    w("Reshape", pooled, w.const([n, bags, width], "shape"), out=node.output.name)


def _divisors(w: _Writer, node: Node, sizes: str, raw_starts: str, count: str, dtype: DType) -> str:
    """[N·B, 1]: what each bag's sum is divided by (graphopt/analysis/jagged_bag.py says which)."""
    n, bags = features(node), bag_count(node)
    zero, one = w.const(0, "div_zero"), w.const(1, "div_one")
    divisors = w("Max", sizes, one, hint="divisors")
    if node.attrs["form"] == "onnx_sequence":  # the last bag: over the indices from its raw start on
        rest = w("Sub", count, w.take(raw_starts, bags - 1, bags, 1, "last_starts"), hint="rest")
        rest = w("Where", w("Less", zero, rest), rest, one, hint="last_divisor")
        if bags > 1:
            others = w.take(divisors, 0, bags - 1, 1, "other_divisors")
            rest = w("Concat", others, rest, hint="all_divisors", axis=1)
        divisors = rest
    divisors = w("Reshape", divisors, w.const([n * bags, 1], "divisor_shape"), hint="divisor_column")
    return w("Cast", divisors, hint="divisor_values", to=dtype.onnx)
