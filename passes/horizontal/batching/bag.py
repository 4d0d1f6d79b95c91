"""A pooled embedding lookup as batching/bags.py reads it, whatever form it was written in."""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.ir import Node, Value


@dataclass(frozen=True)
class Bag:
    output: Value  # [B, D]
    nodes: tuple[Node, ...]  # what computes it from table, indices and weights (erased once batched)
    table: Value  # a constant [V, D]
    indices: Value  # [B, L], a run-time value
    weights: Value | None  # [B, L]
    mode: str  # "sum" | "mean"
    wraps_negative: bool  # ONNX Gather reads -V..-1 from the end; torch rejects negative indices
    kernels: int  # launches the original spends on this bag
