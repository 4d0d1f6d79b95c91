"""``Op.EMBEDDING_BAG`` (graphopt/analysis/embedding_bag.py) written out: as ONNX nodes and as aten calls.

ONNX: ``Gather`` of the rows, ``Mul`` by the unsqueezed weights where given, ``ReduceSum`` or
``ReduceMean`` over the bag axis: standard ops, each one kernel in any runtime.

aten: where the op carries its ``offsets`` (static shapes), one ``_embedding_bag`` call on the flattened
indices, the kernel ``nn.EmbeddingBag`` itself runs (no [..., L, D] intermediate); without them (a
symbolic dim), ``embedding``, ``mul`` and ``sum``/``mean`` over the bag axis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ..ir import Node

if TYPE_CHECKING:
    from .fx_build import FxBuilder
    from .onnx_emit import Emitter

aten = torch.ops.aten
# torch's embedding_bag modes
_TORCH_MODES = {"sum": 0, "mean": 1}


def emit_onnx(e: Emitter, node: Node) -> None:
    table, indices, weights = node.input(0), node.input(1), node.input(2)
    rows = e.temp(f"{node.name}_rows")
    e.node("Gather", [table, indices], [rows], name=f"{node.name}_gather", axis=0)
    if weights is not None:
        scale = e.temp(f"{node.name}_scale")
        if e.opset >= 13:
            axes = e.const(np.asarray([-1], np.int64), f"{node.name}_scale_axes")
            e.node("Unsqueeze", [weights, axes], [scale], name=f"{node.name}_unsqueeze")
        else:  # (axes an attribute before opset 13)
            e.node("Unsqueeze", [weights], [scale], name=f"{node.name}_unsqueeze", axes=[-1])
        weighted = e.temp(f"{node.name}_weighted")
        e.node("Mul", [rows, scale], [weighted], name=f"{node.name}_mul")
        rows = weighted
    reduce = "ReduceSum" if node.attrs["mode"] == "sum" else "ReduceMean"
    if e.opset < (13 if reduce == "ReduceSum" else 18):  # (axes an attribute before)
        e.node(reduce, [rows], [node.output.name], name=node.name, axes=[-2], keepdims=0)
        return
    axes = e.const(np.asarray([-2], np.int64), f"{node.name}_axes")
    e.node(reduce, [rows, axes], [node.output.name], name=node.name, keepdims=0)


def emit_aten(b: FxBuilder, node: Node) -> list:
    table, indices, weights, offsets = (node.input(i) for i in range(4))
    mode, name = node.attrs["mode"], node.output.name
    if offsets is None:
        rows = b.call(aten.embedding.default, (b.arg(table), b.arg(indices)), name=f"{name}_rows")
        if weights is not None:
            scale = b.call(aten.unsqueeze.default, (b.arg(weights), -1), name=f"{name}_scale")
            rows = b.call(aten.mul.Tensor, (rows, scale), name=f"{name}_weighted")
        reduce = aten.sum.dim_IntList if mode == "sum" else aten.mean.dim
        return [b.call(reduce, (rows, [-2]), name=name)]
    flat = b.call(aten.view.default, (b.arg(indices), [-1]), name=f"{name}_indices")
    scale = None
    if weights is not None:
        scale = b.call(aten.view.default, (b.arg(weights), [-1]), name=f"{name}_weights")
    args = (b.arg(table), flat, b.arg(offsets), False, _TORCH_MODES[mode], False, scale, False, -1)
    pooled = b.getitem(b.call(aten._embedding_bag.default, args, name=f"{name}_bag"), 0, f"{name}_pooled")
    sizes = [b.dim(indices, i) for i in range(indices.rank - 1)] + [table.shape[1]]
    return [b.call(aten.view.default, (pooled, sizes), name=name)]
