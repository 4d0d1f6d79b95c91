"""Variable-size bags pooled as one (``Op.JAGGED_BAG``): its reference value (its output type is
``ir/infer.py``'s rule).

N features, each an ``nn.EmbeddingBag`` called with 1-D indices and run-time offsets: feature k's
indices [T_k] fall into B bags (as many for every feature) that its offsets delimit, and each bag
pools its rows of feature k's table: summed, or averaged (``mode``), each row scaled by its
per-sample weight where weights are given. Here the tables are stored one after another in one
table (copied once, at optimize time).

Inputs: ``table`` [R, D]; ``bounds`` [N, 4] int64, a constant, per feature: the rows of its table
V_k, its first row in ``table`` R_k, the position of its first index among all features' indices
taken one after another (the sum of the T_j before it), and T_k; ``indices_k`` [T_k] (N of them);
``offsets_k`` [B] or, with ``last_offset`` (torch's include_last_offset), [B + 1]; ``weights_k``
[T_k] (N of them, or none). Attributes: ``mode`` ("sum" | "mean"), ``last_offset``, ``counts``
(the T_k) and ``form``, the original's reading of offsets and indices, which each backend reproduces:

- "torch" (``aten.embedding_bag``): bag b is indices[offsets[b]:offsets[b + 1]], the last bag up to
  the end of the indices, as torch's contract has it (offsets[0] = 0, non-decreasing, at most T_k;
  with include_last_offset the last equals T_k). An empty bag is zeros in both modes. An index outside
  [0, V_k) is an error, as torch raises for it. Offsets outside the contract are not reproduced (torch
  itself does not agree with itself there: its float32 and float64 CPU kernels read a short last
  offset differently).
- "onnx_loop" (torch.onnx.export, dynamo=False): the exporter's Loop: bag b is
  indices[starts[b]:ends[b]] as ONNX ``Slice`` reads it (a negative bound counts from the end, both are
  clamped to [0, T_k], an end before the start is an empty bag), starts the offsets (with T_k appended
  where the last offset is not included), ends the starts without their first. Only the bags' indices
  are looked up, each wrapped as ONNX ``Gather`` wraps -V_k..-1; one outside is an error. A mean is the
  sum over the bag's size (zeros for an empty bag, as ONNX Runtime's ReduceMean of nothing).
- "onnx_sequence" (torch.onnx.export, dynamo=True): bags as "onnx_loop" reads them, every index
  looked up first (one out of range is an error even if no bag holds it), and the mean of the last bag
  is its sum over T_k minus its raw start (the sum itself where that is not positive): the exporter's
  rendering of torch's CPU kernel.

The output is [N, B, D] of the table's dtype: feature k's bag b at [k, b].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..ir import Node

FORMS = ("torch", "onnx_loop", "onnx_sequence")
# The ONNX opset whose ScatterElements and ScatterND add (reduction="add"): the ONNX form pools with them.
ONNX_OPSET = 16


def features(node: Node) -> int:
    return len(node.attrs["counts"])


def slice_bounds(start: int, end: int, count: int) -> tuple[int, int]:
    """[start, end) of a Slice of ``count`` elements (step 1), as ONNX reads the bounds."""

    def clamp(i: int) -> int:
        return min(max(i + count if i < 0 else i, 0), count)

    return clamp(start), clamp(end)


def evaluate(node: Node, table, bounds, *rest) -> np.ndarray:
    n, form = features(node), node.attrs["form"]
    indices, offsets, weights = rest[:n], rest[n : 2 * n], rest[2 * n : 3 * n] or [None] * n
    bags = len(offsets[0]) - bool(node.attrs["last_offset"])
    out = np.zeros((n, bags, table.shape[1]), dtype=np.float64)
    for k in range(n):
        size, first = int(bounds[k][0]), int(bounds[k][1])
        ids, count = np.asarray(indices[k], dtype=np.int64), len(indices[k])
        if form != "torch":
            ids = np.where(ids < 0, ids + size, ids)
        bad = (ids < 0) | (ids >= size)
        if form != "onnx_loop" and bad.any():
            raise IndexError(f"feature {k}: index out of range of its table of {size} rows")
        edges = [int(o) for o in offsets[k]]
        if not node.attrs["last_offset"]:
            edges.append(count)
        for b in range(bags):
            start, end = edges[b], edges[b + 1]
            if form == "torch":
                end = count if b == bags - 1 else end
            else:
                start, end = slice_bounds(start, end, count)
            members = np.arange(start, max(start, end))
            if bad[members].any():
                raise IndexError(f"feature {k}: index out of range of its table of {size} rows")
            rows = np.asarray(table, dtype=np.float64)[ids[members] + first]
            if weights[k] is not None:
                rows = rows * np.asarray(weights[k], dtype=np.float64)[members, None]
            out[k, b] = rows.sum(axis=0)
            if node.attrs["mode"] == "mean":
                out[k, b] /= _divisor(form, b, bags, len(members), edges[b], count)
    return out.astype(table.dtype)


def _divisor(form: str, b: int, bags: int, size: int, raw_start: int, count: int) -> int:
    if form == "onnx_sequence" and b == bags - 1:
        rest = count - raw_start
        return rest if rest > 0 else 1
    return max(size, 1)
