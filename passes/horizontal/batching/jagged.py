"""Bags of different sizes: ``nn.EmbeddingBag`` called with 1-D indices and run-time offsets.

A DLRM-style model gives each sparse feature's ids as one flat tensor and the offsets where its bags
start (a batch of users, each with a different number of ids, some with none). The forms read here,
one per export path:

- torch.export: ``aten.embedding_bag.padding_idx`` (``_embedding_bag`` once decomposed) on [T]
  indices and [B] offsets ([B + 1] with include_last_offset), per-sample weights [T] or none;
- torch.onnx.export (dynamo=False): the Loop of batching/bag_loops.py, its starts the offsets (with the
  number of indices appended unless the last offset is included), its ends the starts from the
  second on, slicing the [T] indices (and weights) of each bag in turn;
- torch.onnx.export (dynamo=True): every index looked up by one ``Gather`` (the rows scaled by the
  weights, or by ones), then the Loop of batching/bag_loops.py slicing each bag's rows at
  offsets[k]:offsets[k + 1] (the offsets with the number of indices appended unless included).

``pool_jagged`` writes N of them as one ``Op.JAGGED_BAG`` (graphopt/analysis/jagged_bag.py) on their tables
concatenated once, which each backend writes out (graphopt/backends/jagged_bag_emit.py).
"""

from __future__ import annotations

import numpy as np
import onnx

from graphopt.ir import DType, Graph, Node, Op, Value, constant_of
from graphopt.rewrite import Builder

from .bag import Bag
from .bag_loops import (
    DYNAMO_BODIES,
    exported_loop,
    loop_body,
    loop_captured,
    loop_fingerprint,
    loop_scalar,
    torchscript_loop,
)
from .tables import join_tables

INDEX_TYPES = frozenset({DType.INT64, DType.INT32})
# Kernels of the pooled form, whatever N (graphopt/backends/jagged_bag_emit.py). torch: the indices'
# concatenation, each index's table bounds (3 launches on CUDA), the bounds check and move (5), the
# offsets' stack and shift, the pooling. ONNX: its nodes (small index arithmetic most of them): the
# bags' bounds (19), their positions (14), the features' bounds (16), the lookup and the sums (6).
TORCH_KERNELS = 12
ONNX_KERNELS = 55
ONNX_WEIGHT_KERNELS = 4
ONNX_MEAN_KERNELS = {"onnx_loop": 4, "onnx_sequence": 10}  # (the divisors and the division)


def aten_jagged(node: Node, output: Value, args: dict) -> Bag | None:
    """torch.export's embedding_bag on 1-D indices with offsets (``args``: its bound arguments)."""
    indices, offsets, weights = args["indices"], args["offsets"], args.get("per_sample_weights")
    if not isinstance(indices, Value) or not isinstance(offsets, Value) or indices.rank != 1:
        return None
    if weights is not None and not isinstance(weights, Value):
        return None
    mode = {0: "sum", 1: "mean"}.get(args.get("mode", 0))
    if mode is None or args.get("scale_grad_by_freq") or args.get("padding_idx") not in (None, -1):
        return None
    last = bool(args.get("include_last_offset"))
    return Bag(output, (node,), args["weight"], indices, weights, mode, False, 1, offsets, last, "torch")


def plain_jagged(bag: Bag) -> bool:
    """Whether ``bag`` has the types the pooled form takes: a float table, run-time 1-D indices and
    offsets of an integer type, weights of the table's type and the indices' length."""
    table, indices, offsets, weights = bag.table, bag.indices, bag.offsets, bag.weights
    if constant_of(table) is None or table.rank != 2 or not table.dtype.is_float:
        return False
    if indices.rank != 1 or indices.dtype not in INDEX_TYPES or constant_of(indices) is not None:
        return False
    if offsets.rank != 1 or offsets.dtype not in INDEX_TYPES:
        return False
    return weights is None or (weights.rank == 1 and weights.dtype == table.dtype)


def static_sizes(bag: Bag) -> bool:
    return isinstance(bag.indices.shape[0], int) and isinstance(bag.offsets.shape[0], int)


def bag_count(bag: Bag) -> int | None:
    count = bag.offsets.shape[0]
    return count - bag.last_offset if isinstance(count, int) else None


# ----- the ONNX exporters' Loops -----------------------------------------------------------------


def loop_jagged(value: Value) -> Bag | None:
    found = exported_loop(value)
    if found is None:
        return None
    concat, loop = found
    return _dynamo(value, concat, loop) if concat is not None else _torchscript(value, loop)


def _edges(edges: Value | None, count) -> tuple[Value, bool, list[Node]] | None:
    """(offsets, last_offset, the nodes between): ``edges`` is the offsets with the number of indices
    ``count`` appended (include_last_offset off), or the offsets themselves (on)."""
    if edges is None or edges.rank != 1 or constant_of(edges) is not None:
        return None
    node = edges.producer
    if node is not None and node.op == Op.CONCAT and len(node.inputs) == 2:
        end = constant_of(node.input(1))
        if end is not None and end.numpy().reshape(-1).tolist() == [count] and node.input(0).rank == 1:
            return node.input(0), False, [node]
    return edges, True, []


def _torchscript(output: Value, loop: Node) -> Bag | None:
    parts = torchscript_loop(loop)
    if parts is None:
        return None
    body, mode, gathers, slices = parts.body, parts.mode, parts.gathers, parts.slices
    starts, ends = parts.starts, parts.ends
    table, indices, weights = parts.table, parts.indices, parts.weights
    if table is None or indices is None or indices.rank != 1 or (parts.weighted and weights is None):
        return None
    if gathers[2].input[1] != slices[0].output[0] or not _bounded_by(body, slices, gathers):
        return None
    edges = _edges(starts, indices.shape[0])
    if edges is None or not _follows(ends, starts):
        return None
    offsets, last, between = edges
    if loop_scalar(loop.input(0)) != ends.shape[0]:  # (the trip count: one iteration a bag)
        return None
    nodes = [loop, ends.producer, *between]
    kernels = len(nodes) + ends.shape[0] * len(body.node)
    return Bag(output, tuple(nodes), table, indices, weights, mode, True, kernels, offsets, last, "onnx_loop")


def _bounded_by(body: onnx.GraphProto, slices, gathers) -> bool:
    """Whether each Slice of the body runs from the first Gather's value to the second's."""
    made = {out: n for n in body.node for out in n.output}

    def source(name):
        node = made.get(name)
        return node.input[0] if node is not None and node.op_type == "Unsqueeze" else None

    expected = (gathers[0].output[0], gathers[1].output[0])
    return all((source(s.input[1]), source(s.input[2])) == expected for s in slices)


def _follows(ends: Value | None, starts: Value) -> bool:
    """Whether ``ends`` is ``starts`` from its second element on."""
    node = ends.producer if ends is not None else None
    if node is None or node.op != Op.SLICE or node.input(0) is not starts or len(node.inputs) != 1:
        return False
    a = node.attrs
    length = starts.shape[0]
    return (
        tuple(a["axes"]) in ((0,), (-1,))
        and tuple(a["starts"]) == (1,)
        and tuple(a.get("steps", (1,))) == (1,)
        and isinstance(length, int)
        and a["ends"][0] >= length
        and ends.shape[0] == length - 1
    )


def _dynamo(output: Value, concat: Node, loop: Node) -> Bag | None:
    body = loop_body(loop)
    if body is None or loop.input(0) is not None:
        return None
    mode = DYNAMO_BODIES.get(loop_fingerprint(body))
    captured = loop_captured(loop, body)
    reads = [n for n in body.node if n.op_type == "Slice"]
    less = [n for n in body.node if n.op_type == "Less"]
    if mode is None or len(reads) != 2 or len(less) != 1:
        return None
    edges, bags = captured.get(reads[0].input[0]), loop_scalar(captured.get(less[0].input[1]))
    if edges is None or reads[1].input[0] != reads[0].input[0]:
        return None
    rows = [v for n, v in captured.items() if v.rank == 2 and constant_of(v) is None and v is not edges]
    if len(rows) != 1 or len(rows[0].uses) != 1:
        return None
    nodes, gathered, weights = [concat, loop], rows[0], None
    mul = gathered.producer
    if mul is not None and mul.op == Op.MUL:
        gathered, weights = mul.input(0), _per_row(mul.input(1))
        if weights is False:
            return None
        nodes.append(mul)
    lookup = gathered.producer
    if lookup is None or lookup.op != Op.GATHER or len(gathered.uses) != 1:
        return None
    if lookup.attrs.get("axis", 0) != 0:
        return None
    indices = _flat(lookup.input(1))
    if indices is None or (weights is not None and weights.shape != indices.shape):
        return None
    found = _edges(edges, indices.shape[0])
    if found is None or not isinstance(edges.shape[0], int) or bags != edges.shape[0] - 1:
        return None
    offsets, last, between = found
    if mode == "mean" and not _last_bag_rule(body, captured, bags, indices.shape[0]):
        return None
    nodes += [lookup, *between]
    kernels = len(nodes) + bags * len(body.node)
    table, form = lookup.input(0), "onnx_sequence"
    return Bag(output, tuple(nodes), table, indices, weights, mode, True, kernels, offsets, last, form)


def _per_row(scale: Value | None):
    """The weights w [T] where ``scale`` is w unsqueezed to [T, 1]; None where it is all ones (the
    exporter's unweighted form); False for anything else."""
    ones = constant_of(scale) if scale is not None else None
    if ones is not None:
        return None if np.all(ones.numpy() == 1) else False
    node = scale.producer if scale is not None else None
    if node is None or node.op != Op.UNSQUEEZE or node.attrs.get("axes") not in ((1,), (-1,)):
        return False
    weights = node.input(0)
    return weights if weights is not None and weights.rank == 1 else False


def _flat(value: Value | None) -> Value | None:
    """The 1-D run-time indices ``value`` is (or is a reshape to one dim of)."""
    node = value.producer if value is not None else None
    if node is not None and node.op == Op.RESHAPE and tuple(node.attrs.get("shape", ())) == (-1,):
        value = node.input(0)
    return value if value is not None and value.rank == 1 else None


def _last_bag_rule(body: onnx.GraphProto, captured: dict[str, Value], bags: int, count) -> bool:
    """Whether dynamo's mean body divides the last bag (index bags - 1) by the number of indices (a
    constant) minus its start: what graphopt/analysis/jagged_bag.py's "onnx_sequence" form reproduces."""
    seen = {"Equal": False, "Sub": False}
    for node in _walk(body):
        if node.op_type == "Sub":
            total = loop_scalar(captured.get(node.input[0]))
            if total != count:
                return False
            seen["Sub"] = True
        if node.op_type == "Equal":
            constants = [loop_scalar(captured[i]) for i in node.input if i in captured]
            if constants:
                if constants != [bags - 1]:
                    return False
                seen["Equal"] = True
    return all(seen.values())


def _walk(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _walk(a.g)


# ----- the pooled form ---------------------------------------------------------------------------


def pooled_jagged_kernels(graph: Graph, bags: list[Bag], axis: int) -> int:
    """About the launches of ``pool_jagged``'s form (graphopt/backends/jagged_bag_emit.py)."""
    if graph.meta.get("frontend") != "onnx":
        kernels = TORCH_KERNELS + (bags[0].weights is not None)
    else:
        kernels = ONNX_KERNELS + ONNX_WEIGHT_KERNELS * (bags[0].weights is not None)
        kernels += ONNX_MEAN_KERNELS[bags[0].form] if bags[0].mode == "mean" else 0
    return kernels + (axis != 0)  # (the [B, N, D] view of the [N, B, D] result)


def pool_jagged(graph: Graph, b: Builder, bags: list[Bag], axis: int) -> Value:
    """One jagged_bag on the bags' tables concatenated: [N, B, D], or [B, N, D] for ``axis`` 1."""
    table, tables, _ = join_tables(graph, b, [bag.table for bag in bags], "embedding_bag_tables")
    counts = [bag.indices.shape[0] for bag in bags]
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    layout = [[bag.table.shape[0], tables[bag.table], first, count] for bag, first, count in zip(
        bags, firsts, counts, strict=True)]  # fmt: skip
    bounds = b.constant(np.asarray(layout, np.int64), graph.fresh_name("bag_bounds"), DType.INT64)
    inputs = [table, bounds, *(bag.indices for bag in bags), *(bag.offsets for bag in bags)]
    if bags[0].weights is not None:
        inputs += [bag.weights for bag in bags]
    first = bags[0]
    pooled = b.node(
        Op.JAGGED_BAG, *inputs, mode=first.mode, form=first.form, last_offset=first.last_offset,
        counts=tuple(counts),
    ).output  # fmt: skip
    return b.transpose(pooled, perm=(1, 0, 2)) if axis == 1 else pooled
