"""A pooled embedding lookup as batching/bags.py reads it, whatever form it was written in."""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.ir import Node, Value


@dataclass(frozen=True)
class Bag:
    output: Value  # [B, D]
    nodes: tuple[Node, ...]  # what computes it from table, indices and weights (erased once batched)
    table: Value  # a constant [V, D]
    indices: Value  # [B, L] (or [T], bags of different sizes), a run-time value
    weights: Value | None  # as indices
    mode: str  # "sum" | "mean"
    wraps_negative: bool  # ONNX Gather reads -V..-1 from the end; torch rejects negative indices
    kernels: int  # launches the original spends on this bag
    # Bags of different sizes (batching/jagged.py): indices and weights are [T], the bags delimited by
    # run-time ``offsets`` [B] ([B + 1] with ``last_offset``, torch's include_last_offset), read as
    # ``form`` says (analysis/jagged_bag.py: "torch", "onnx_loop", "onnx_sequence"); None: fixed size.
    offsets: Value | None = None
    last_offset: bool = False
    form: str | None = None
