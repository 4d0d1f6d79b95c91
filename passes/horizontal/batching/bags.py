"""Pooled embedding lookups ("bags") as exporters write them, read back as one description.

A bag lookup pools rows of a constant table [V, D] at a [B, L] block of indices into [B, D]: the sum
or the mean of each row's L looked-up rows, each scaled by its per-sample weight where given. The
forms read here:

- torch.export of ``nn.EmbeddingBag`` on [B, L] indices: the indices and weights flattened, offsets
  ``arange(0, B * L, L)``, and ``embedding_bag.padding_idx`` (``_embedding_bag`` once decomposed);
- the hand-written ``emb(ids).sum(1)`` / ``.mean(1)``, with ``* w.unsqueeze(-1)`` before a sum:
  ONNX ``Gather`` → (``Mul``) → ``ReduceSum`` / ``ReduceMean``, aten ``embedding`` → (``mul``) →
  ``sum`` / ``mean``;
- the ONNX exporters' ``nn.EmbeddingBag``, a ``Loop`` over the bags (passes/horizontal/batching/bag_loops.py).

Those are fixed-size bags (every bag L rows, none empty). ``nn.EmbeddingBag`` called with 1-D indices
and run-time offsets (bags of different sizes, empty ones included, include_last_offset either way) is
read too, in all three export paths' forms (passes/horizontal/batching/jagged.py): a ``Bag`` with
``offsets`` and the ``form`` its original reads them in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from graphopt.frontends.fx_source import Ref
from graphopt.ir import DType, Node, Op, Value, constant_of, opaque_name

from .bag import Bag
from .bag_loops import loop_bag
from .jagged import aten_jagged, loop_jagged, plain_jagged

INDEX_TYPES = frozenset({DType.INT64, DType.INT32})
ATEN_EMBEDDING = opaque_name("aten", "embedding.default")
ATEN_BAGS = frozenset(
    opaque_name("aten", name)
    for name in ("embedding_bag.padding_idx", "embedding_bag.default", "_embedding_bag.default")
)
ATEN_SUM = opaque_name("aten", "sum.dim_IntList")
ATEN_ARANGE = opaque_name("aten", "arange.start_step")
ONNX_REDUCE_SUM = opaque_name("onnx", "ReduceSum")
_TORCH_MODES = {0: "sum", 1: "mean"}


def as_bag(value: Value) -> Bag | None:
    """The bag lookup that produces ``value``, or None if it is not one."""
    node = value.producer
    if node is None:
        return None
    if node.op in ATEN_BAGS:
        found = _aten_bag(node, value)
    elif node.op in (ONNX_REDUCE_SUM, ATEN_SUM, Op.REDUCE_MEAN):
        found = _reduced_lookup(node)
    else:
        found = loop_bag(value) or loop_jagged(value)
    if found is None or not (_plain(found) if found.form is None else plain_jagged(found)):
        return None
    return found


def _plain(bag: Bag) -> bool:
    table, indices, weights = bag.table, bag.indices, bag.weights
    if constant_of(table) is None or table.rank != 2 or not table.dtype.is_float:
        return False
    if indices.rank != 2 or indices.dtype not in INDEX_TYPES or constant_of(indices) is not None:
        return False
    if not isinstance(indices.shape[1], int) or indices.shape[1] < 1:
        return False
    return weights is None or (weights.shape == indices.shape and weights.dtype == table.dtype)


# ----- torch.export's nn.EmbeddingBag ------------------------------------------------------------


def _aten_bag(node: Node, output: Value) -> Bag | None:
    if output is not node.outputs[0] or any(v.uses for v in node.outputs[1:]):
        return None
    args = call_arguments(node)
    if args is None:
        return None
    flat = args["indices"]
    if isinstance(flat, Value) and flat.rank == 1 and not _fixed_offsets(flat, args["offsets"]):
        return aten_jagged(node, output, args)
    if args.get("include_last_offset") or args.get("padding_idx") not in (None, -1):
        return None
    mode = _TORCH_MODES.get(args.get("mode", 0))
    flat, offsets, flat_weights = args["indices"], args["offsets"], args.get("per_sample_weights")
    if mode is None or args.get("scale_grad_by_freq") or not isinstance(flat, Value):
        return None
    indices = _flattened(flat)
    if indices is None or indices.shape is None or not all(isinstance(d, int) for d in indices.shape):
        return None
    rows, size = indices.shape
    if not _is_arange(offsets, rows * size, size):
        return None
    weights = None
    if flat_weights is not None:
        weights = _flattened(flat_weights) if isinstance(flat_weights, Value) else None
        if weights is None:
            return None
    table = args["weight"]
    nodes = tuple(n for n in (node, flat.producer, offsets.producer) if n is not None)
    kernels = 1 + (offsets.producer is not None)
    return Bag(output, nodes, table, indices, weights, mode, False, kernels)


def _fixed_offsets(flat: Value, offsets: Any) -> bool:
    """Whether ``offsets`` make bags of one size L of the flattened [B, L] block ``flat``."""
    indices = _flattened(flat)
    shape = indices.shape if indices is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return False
    return _is_arange(offsets, shape[0] * shape[1], shape[1])


def call_arguments(node: Node) -> dict[str, Any] | None:
    """An opaque aten call's arguments by name: IR values for tensors, Python values for the rest."""
    source = getattr(node, "source", None)
    calls = getattr(source, "calls", None)
    if not calls or len(calls) != 1:
        return None
    call = calls[0]
    schema = getattr(call.target, "_schema", None)
    if schema is None:
        return None
    bound: dict[str, Any] = {}
    for i, argument in enumerate(schema.arguments):
        if i < len(call.args):
            value = call.args[i]
        elif argument.name in call.kwargs:
            value = call.kwargs[argument.name]
        elif argument.has_default_value():
            value = argument.default_value
        else:
            return None
        if isinstance(value, Ref):  # a tensor argument: an input of the node
            value = node.input(value.input)
        bound[argument.name] = value
    return bound


def _flattened(value: Value) -> Value | None:
    """x where ``value`` is x [B, L] reshaped to one dim."""
    node = value.producer
    if node is None or node.op != Op.RESHAPE or tuple(node.attrs.get("shape", ())) != (-1,):
        return None
    source = node.input(0)
    return source if source is not None and source.rank == 2 else None


def _is_arange(value: Any, end: int, step: int) -> bool:
    """Whether ``value`` is arange(0, end, step)."""
    if not isinstance(value, Value):
        return False
    tensor = constant_of(value)
    if tensor is not None:
        return np.array_equal(tensor.numpy(), np.arange(0, end, step))
    node = value.producer
    if node is None or node.op != ATEN_ARANGE:
        return False
    args = call_arguments(node)
    return args is not None and (args["start"], args["end"], args["step"]) == (0, end, step)


# ----- the hand-written emb(ids).sum(1) -----------------------------------------------------------


def _reduced_lookup(node: Node) -> Bag | None:
    """emb(ids) [* w.unsqueeze(-1)] .sum(1) / .mean(1), keepdims off."""
    axes, keep, mode = _reduction(node)
    x = node.input(0)
    if axes != (1,) or keep or x is None or x.rank != 3 or len(x.uses) != 1:
        return None
    nodes, weights, lookup = [node], None, x.producer
    if lookup is not None and lookup.op == Op.MUL and mode == "sum":
        found = _weighted(lookup)
        if found is None:
            return None
        rows, weights, scale = found
        nodes += [lookup] + ([scale] if len(scale.output.uses) == 1 else [])
        lookup = rows.producer if len(rows.uses) == 1 else None
    if lookup is None or lookup.op not in (Op.GATHER, ATEN_EMBEDDING) or len(lookup.inputs) != 2:
        return None
    if lookup.op == Op.GATHER and lookup.attrs.get("axis", 0) != 0:
        return None
    nodes.append(lookup)
    table, indices = lookup.input(0), lookup.input(1)
    kernels = sum(n.op not in (Op.UNSQUEEZE, Op.RESHAPE) for n in nodes)
    return Bag(node.output, tuple(nodes), table, indices, weights, mode, lookup.op == Op.GATHER, kernels)


def _reduction(node: Node) -> tuple[tuple[int, ...] | None, bool, str]:
    """(axes, keepdims, mode) of a sum or mean, with axes made positive; axes None where unknown."""
    x = node.input(0)
    rank = x.rank if x is not None else None
    if node.op == Op.REDUCE_MEAN:
        axes, keep, mode = node.attrs.get("axes"), node.attrs.get("keepdims", True), "mean"
        if len(node.inputs) != 1:
            axes = None
    elif node.op == ATEN_SUM:
        args = call_arguments(node)
        if args is None or args.get("dtype") is not None:
            return None, False, "sum"
        axes, keep, mode = args["dim"], bool(args.get("keepdim")), "sum"
    else:  # ONNX ReduceSum: axes an input from opset 13, an attribute before
        attrs = _onnx_attrs(node)
        keep, mode = bool(attrs.get("keepdims", 1)), "sum"
        axes = attrs.get("axes")
        if axes is None and len(node.inputs) > 1 and node.input(1) is not None:
            tensor = constant_of(node.input(1))
            axes = None if tensor is None else tensor.ints()
        if attrs.get("noop_with_empty_axes", 0) or not axes:
            axes = None
    if axes is None or rank is None:
        return None, False, mode
    return tuple(sorted(a % rank for a in axes)), keep, mode


def _onnx_attrs(node: Node) -> dict[str, Any]:
    proto = getattr(node, "source", None)
    return {} if proto is None else {a.name: helper.get_attribute_value(a) for a in proto.attribute}


def _weighted(mul: Node) -> tuple[Value, Value, Node] | None:
    """(rows, w, the unsqueeze) where ``mul`` is rows * w.unsqueeze(-1) (either operand order)."""
    for rows, scale in ((mul.input(0), mul.input(1)), (mul.input(1), mul.input(0))):
        node = scale.producer if scale is not None else None
        if node is None or node.op != Op.UNSQUEEZE or node.attrs.get("axes") not in ((2,), (-1,)):
            continue
        if len(node.inputs) == 1 and node.input(0).rank == 2 and rows is not None and rows.rank == 3:
            return rows, node.input(0), node
    return None
