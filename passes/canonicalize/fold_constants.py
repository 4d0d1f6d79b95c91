"""fold_constants: nodes whose inputs are all constants are computed now, once.

Exporters compute split bounds and view shapes at run time from ``Shape`` of tensors whose shapes are
static (torch's TorchScript exporter writes ``Shape → Gather → Add → Div → Mul → Slice`` for a
``chunk``); folding them turns those into constants, so the other passes see static slices and views.
Shapes the folding makes known are propagated through the ops after it, and shape-like inputs that
became constants are read into attributes (``fold_shape_inputs``' rules), which makes the outputs of
those slices and views known in turn: the ``Shape`` nodes after them fold in the next round. Rounds
go on until one folds nothing (torchvision's Swin from the TorchScript exporter takes five, each
shifted window's slices computed from the shapes of the last).

A tensor that in-place ops write is no constant node by node; where the program makes it fresh and
fills it from constants (Swin's shifted-window mask in a torch.export program), the frontend runs the
whole region in order (``graph.meta["evaluate_region"]``) and what is read of it after becomes
constants (filled_tensors finds the regions).
"""

from __future__ import annotations

import logging

import numpy as np

from graphopt.analysis.evaluate import CORRECTLY_ROUNDED, can_evaluate, evaluate
from graphopt.ir import Graph, Op, Tensor, constant_of, infer_outputs, record_origins
from graphopt.ir.ops import VIEWS
from graphopt.rewrite import Pass, RewriteStats, count_rewrite, may_rewrite

from .filled_tensors import filled_tensors
from .fold_shape_inputs import PASS as FOLD_SHAPE_INPUTS

log = logging.getLogger(__name__)

# A folded result may be larger than its inputs (Expand, ConstantOfShape, Tile, a Cast of float16
# weights to float32); the bytes folding adds over the whole graph stay under this, so optimized models
# do not grow (a limit per node let every one of many small weights' Casts double them).
GROWTH_LIMIT = 1 << 20
# (a bound on the rounds; each folds at least one node, so it only cuts off very long shape chains)
MAX_ROUNDS = 32


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    budget = [GROWTH_LIMIT]  # (bytes that folding may still add, over all rounds)
    for _ in range(MAX_ROUNDS):
        folded = stats.counts["fold_constant"] + stats.counts["fold_filled_tensor"]
        _fold(graph, stats, budget)
        _fold_filled(graph, stats, budget)
        if stats.counts["fold_constant"] + stats.counts["fold_filled_tensor"] == folded or not may_rewrite():
            break
        graph.remove_dead(keep_constants=True)
        refine_shapes(graph)
        # (its near misses are the pipeline's own fold_shape_inputs pass's to report, after the last round)
        stats.counts.update(FOLD_SHAPE_INPUTS.run(graph).counts)
        graph.sort()
        refine_shapes(graph)
    graph.remove_dead(keep_constants=True)
    return stats


def _fold(graph: Graph, stats: RewriteStats, budget: list[int]) -> None:
    """One sweep over the graph, folding every node whose inputs are constants by now."""
    evaluate_opaque = graph.meta.get("evaluate")
    dtype_only = graph.meta.get("dtype_only_inputs", _no_inputs)
    written = _written_in_place(graph)
    for node in graph:
        if node.op == Op.CONSTANT or node.meta.get("side_effects") or not node.outputs:
            continue
        if node in written:
            continue  # a fresh tensor an in-place op then writes to (maybe through a view) is no constant
        arrays = _static_inputs(node, dtype_only(node))
        if arrays is None:
            continue
        inputs = [v for v in node.inputs if v is not None]
        sizes = [_bytes(v) for v in node.outputs]
        out_bytes = None if None in sizes else sum(sizes)  # an output of unknown size stays computed
        in_bytes = sum(constant_of(v).nbytes for v in inputs if constant_of(v) is not None)
        if out_bytes is None or out_bytes - in_bytes > budget[0]:
            continue
        if not may_rewrite():
            break
        try:
            if node.op in CORRECTLY_ROUNDED and can_evaluate(node):
                results = evaluate(node, [a for a in arrays if a is not None])
            elif node.source is not None and evaluate_opaque is not None:
                results = evaluate_opaque(node, arrays)
            elif can_evaluate(node):
                results = evaluate(node, [a for a in arrays if a is not None])
            else:
                continue
        except Exception as error:  # a node the evaluator cannot run stays as it is
            log.info("not folding %s %r: %s", node.op, node.name, error)
            continue
        if results is None:
            continue
        for value, array in zip(node.outputs, results, strict=True):
            if value.uses or graph.is_output(value):
                constant = graph.add_constant(
                    Tensor.from_array(np.asarray(array), value.dtype), f"{value.name}_folded"
                )
                # (a shape is computed from no tensor's values)
                record_origins(constant, () if node.op == Op.SHAPE else inputs)
                graph.replace_all_uses(value, constant)
        budget[0] -= max(out_bytes - in_bytes, 0)
        count_rewrite("fold_constant", node.name)
        stats.counts["fold_constant"] += 1


def _fold_filled(graph: Graph, stats: RewriteStats, budget: list[int]) -> None:
    """Folds the tensors made fresh and filled in place whose calls read only constants (and the dtype
    of what else they read), as far as the frontend can run them."""
    evaluate_region = graph.meta.get("evaluate_region")
    if evaluate_region is None:
        return
    dtype_only = graph.meta.get("dtype_only_inputs", _no_inputs)
    for region in filled_tensors(graph):
        arrays = _region_inputs(region.nodes, dtype_only)
        sizes = [_bytes(v) for v in (region.nodes[0].output, *region.read)]
        # (the evaluation makes the whole tensor, however little of it is read: that is bounded too)
        if arrays is None or None in sizes or sizes[0] > GROWTH_LIMIT:
            continue
        in_bytes = sum(constant_of(v).nbytes for v in arrays if constant_of(v) is not None)
        out_bytes = sum(sizes[1:])
        if out_bytes - in_bytes > budget[0]:
            continue
        if not may_rewrite():
            break
        try:
            results = evaluate_region(region.nodes, arrays, region.read)
        except Exception as error:  # a region the evaluator cannot run stays as it is
            log.info("not folding the tensor %r filled in place: %s", region.nodes[0].name, error)
            continue
        if results is None:
            continue
        for value, array in zip(region.read, results, strict=True):
            constant = graph.add_constant(Tensor.from_array(array, value.dtype), f"{value.name}_folded")
            record_origins(constant, arrays)
            graph.replace_all_uses(value, constant, new_is_earlier=True)
        for node in reversed(region.nodes):
            graph.erase(node)
        budget[0] -= max(out_bytes - in_bytes, 0)
        count_rewrite("fold_filled_tensor", region.nodes[0].name)
        stats.counts["fold_filled_tensor"] += 1


def _region_inputs(nodes: list, dtype_only) -> dict | None:
    """An array for each value ``nodes`` read from outside them, or None where one is no constant
    (and not read for its dtype alone by every node that reads it)."""
    members = set(nodes)
    arrays = {}
    for node in nodes:
        for k, value in enumerate(node.inputs):
            if value is None or value.producer in members:
                continue
            array = _input_array(node, k, dtype_only(node))
            if array is None:
                return None
            arrays[value] = array
    return arrays


def _written_in_place(graph: Graph) -> set:
    """Nodes whose output an in-place op may write: the producer of each mutating node's first input
    and, through views (which alias their input), the producers above it. A producer that computes a
    fresh tensor ends the walk: what it read is not written."""
    written = set()
    for node in graph:
        if not node.meta.get("mutates"):
            continue
        value = node.input(0)
        while value is not None and value.producer is not None and value.producer not in written:
            producer = value.producer
            written.add(producer)
            if producer.op not in VIEWS and not producer.meta.get("aliases_input"):
                break
            value = producer.input(0)
    return written


def _static_inputs(node, dtype_only: frozenset[int] = frozenset()) -> list[np.ndarray] | None:
    """The node's input arrays when all are constants or read for their dtype only (``dtype_only``);
    for Shape, when the shape is static."""
    if node.op == Op.SHAPE:
        x = node.input(0)
        if x.static_shape is None:
            return None
        return [np.broadcast_to(np.zeros((), np.uint8), x.static_shape)]  # a shape without the memory
    arrays = [None if v is None else _input_array(node, k, dtype_only) for k, v in enumerate(node.inputs)]
    if any(a is None and v is not None for a, v in zip(arrays, node.inputs, strict=True)):
        return None
    return arrays


def _input_array(node, k: int, dtype_only: frozenset[int]) -> np.ndarray | None:
    value = node.input(k)
    tensor = constant_of(value)
    if tensor is not None:
        return tensor.numpy()
    if k in dtype_only and value.dtype is not None:
        return np.zeros((), value.dtype.numpy)  # (a stand-in: the node reads nothing else of it)
    return None


def _no_inputs(node) -> frozenset[int]:
    return frozenset()


def _bytes(value) -> int | None:
    if value.static_shape is None or value.dtype is None:
        return None
    return int(np.prod(value.static_shape, dtype=np.int64)) * value.dtype.itemsize


def refine_shapes(graph: Graph) -> None:
    """Fills in dims that the canonical shape rules, and for the ops the IR carries verbatim the
    frontend's inference (``graph.meta["infer"]``: ONNX's for an ONNX op), can now compute."""
    infer_opaque = graph.meta.get("infer")
    for node in graph:
        opaque = ":" in node.op
        if opaque and (infer_opaque is None or node.source is None):
            continue
        try:
            inferred = infer_opaque(node) if opaque else infer_outputs(node)
        except Exception:
            continue
        for value, (dtype, shape) in zip(node.outputs, inferred or (), strict=False):
            value.dtype = value.dtype or dtype
            if shape is None:
                continue
            if value.shape is None or (len(value.shape) != len(shape) and not opaque):
                value.shape = shape
            elif len(value.shape) == len(shape):
                # (a verbatim op's inference only fills dims: it knows no symbolic names)
                value.shape = tuple(
                    new if isinstance(new, int) and not (opaque and isinstance(old, int)) else old
                    for old, new in zip(value.shape, shape, strict=True)
                )


PASS = Pass(
    "fold_constants",
    "Compute nodes whose inputs are all constants (shape arithmetic, weight transposes).",
    run,
)
