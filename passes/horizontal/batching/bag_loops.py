"""The ONNX exporters' ``nn.EmbeddingBag``: a Loop over the bags, read back as one bag lookup.

Both ``torch.onnx.export`` paths write ``nn.EmbeddingBag`` as a Loop with one iteration per bag,
which slices the bag's rows out of the looked-up rows and reduces them: B small iterations where one
``Gather`` and one ``ReduceSum`` would do. A Loop is read as a bag lookup only where its body is, op
for op, one the exporters write (the fingerprints below) and its operands say fixed-size bags:
offsets ``arange(0, B·L + 1, L)`` over indices that are a [B, L] block flattened.

- TorchScript (``dynamo=False``): ``Loop(B)`` whose body slices the flat indices (and weights) at
  ``offsets[k]:offsets[k+1]``, gathers the table's rows, (scales them) and reduces: its scan output
  is [B, D].
- dynamo (``dynamo=True``): ``Gather`` of every index's row outside, (``Mul`` by the weights), then a
  Loop that slices each bag's rows and appends their sum or mean to a sequence, and
  ``ConcatFromSequence``.

The same Loops over run-time offsets (bags of different sizes) are read by batching/jagged.py, with
the fingerprints and helpers here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from graphopt.ir import Node, Op, Value, constant_of, opaque_name

from .bag import Bag

LOOP = opaque_name("onnx", "Loop")
CONCAT_FROM_SEQUENCE = opaque_name("onnx", "ConcatFromSequence")
# Loop bodies as the exporters write them (torch 2.11-2.13): op types in order, subgraphs bracketed.
_DYNAMO_HEAD = "Reshape CastLike Add Slice CastLike Add CastLike Add Slice Equal If [then_branch ] "
_DYNAMO_TAIL = " SequenceInsert CastLike Add Less"
_DYNAMO_MEAN = (
    "[else_branch Slice Equal If [then_branch ReduceSum Sub CastLike Greater If [then_branch Cast Div ] "
    "[else_branch Identity ] ] [else_branch ReduceMean ] ]"
)
_TS_HEAD = "Gather Gather Constant Unsqueeze Constant Unsqueeze Slice Gather "
DYNAMO_BODIES = {
    _DYNAMO_HEAD + "[else_branch Slice ReduceSum ]" + _DYNAMO_TAIL: "sum",
    _DYNAMO_HEAD + _DYNAMO_MEAN + _DYNAMO_TAIL: "mean",
}
TORCHSCRIPT_BODIES = {
    _TS_HEAD + "Constant ReduceSum Cast": ("sum", False),
    _TS_HEAD + "ReduceMean Cast": ("mean", False),
    _TS_HEAD + "Slice Constant Unsqueeze Mul Constant ReduceSum Cast": ("sum", True),
}


def loop_bag(value: Value) -> Bag | None:
    found = exported_loop(value)
    if found is None:
        return None
    concat, loop = found
    return _dynamo_bag(value, concat, loop) if concat is not None else _torchscript_bag(value, loop)


def exported_loop(value: Value) -> tuple[Node | None, Node] | None:
    """(ConcatFromSequence, Loop) where ``value`` is the sequence a dynamo export's Loop appended to,
    concatenated; (None, Loop) where it is a TorchScript export's Loop output; else None."""
    node = value.producer
    if node.op == CONCAT_FROM_SEQUENCE and len(node.inputs) == 1:
        loop = node.input(0).producer
        if loop is None or loop.op != LOOP or node.input(0) is not loop_appended(loop):
            return None
        return node, loop
    if node.op == LOOP and len(node.outputs) == 1:
        return None, node
    return None


def loop_body(loop: Node) -> onnx.GraphProto | None:
    proto = getattr(loop, "source", None)
    if not isinstance(proto, onnx.NodeProto):
        return None
    bodies = [a.g for a in proto.attribute if a.name == "body"]
    return bodies[0] if bodies else None


def loop_appended(loop: Node) -> Value | None:
    """The Loop's output that its body appends each bag's result to (the exporter writes the
    loop-carried values in either order)."""
    body = loop_body(loop)
    if body is None:
        return None
    inserted = {n.output[0] for n in body.node if n.op_type == "SequenceInsert"}
    carried = [i for i, out in enumerate(body.output[1:]) if out.name in inserted]
    return loop.outputs[carried[0]] if len(carried) == 1 and carried[0] < len(loop.outputs) else None


def loop_fingerprint(graph: onnx.GraphProto) -> str:
    parts = []
    for node in graph.node:
        parts.append(node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                parts.append(f"[{a.name} {loop_fingerprint(a.g)} ]".replace("  ]", " ]"))
    return " ".join(parts)


def loop_captured(loop: Node, body: onnx.GraphProto) -> dict[str, Value]:
    """The outer values the body reads, by the names it reads them by (in the order the ONNX
    frontend appends them to the Loop's inputs: first read first, nested bodies where they occur)."""
    names: dict[str, None] = {}
    _free_names(body, set(), names)
    values = loop.inputs[loop.meta.get("explicit_inputs", len(loop.inputs)) :]
    return dict(zip(names, values, strict=False)) if len(names) == len(values) else {}


def _free_names(graph: onnx.GraphProto, outer: set[str], free: dict[str, None]) -> None:
    bound = set(outer) | {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        for name in node.input:
            if name and name not in bound:
                free[name] = None
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _free_names(a.g, bound, free)
        bound.update(node.output)
    for output in graph.output:
        if output.name not in bound:
            free[output.name] = None


def _block(flat: Value | None) -> Value | None:
    """x [B, L] where ``flat`` is x flattened by one or more reshapes."""
    while flat is not None and flat.producer is not None and flat.producer.op == Op.RESHAPE:
        flat = flat.producer.input(0)
        if flat is not None and flat.rank == 2:
            return flat
    return None


def _fixed_offsets(value: Value | None, block: Value, with_end: bool = True) -> bool:
    """Whether ``value`` is the constant arange(0, B·L (+ 1), L) of a [B, L] block."""
    tensor = constant_of(value) if value is not None else None
    shape = block.shape
    if tensor is None or shape is None or not all(isinstance(d, int) for d in shape):
        return False
    rows, size = shape
    return np.array_equal(tensor.numpy().reshape(-1), np.arange(0, rows * size + with_end, size))


def loop_scalar(value: Value | None) -> int | None:
    tensor = constant_of(value) if value is not None else None
    return None if tensor is None or tensor.numpy().size != 1 else int(tensor.numpy().reshape(-1)[0])


def _make(output: Value, nodes, table, indices, weights, mode, body) -> Bag:
    # (B iterations of the body's ops: the launches the original spends)
    kernels = len(nodes) + indices.shape[0] * len(body.node)
    return Bag(output, tuple(nodes), table, indices, weights, mode, True, kernels)


def _dynamo_bag(output: Value, concat: Node, loop: Node) -> Bag | None:
    body = loop_body(loop)
    if body is None or len(body.node) < 1 or loop.input(0) is not None:
        return None
    mode = DYNAMO_BODIES.get(loop_fingerprint(body))
    captured = loop_captured(loop, body)
    reads = [n for n in body.node if n.op_type == "Slice"]
    less = [n for n in body.node if n.op_type == "Less"]
    if mode is None or len(reads) != 2 or len(less) != 1:
        return None
    offsets, bags = captured.get(reads[0].input[0]), loop_scalar(captured.get(less[0].input[1]))
    rows_names = [n for n in captured if n not in (reads[0].input[0], less[0].input[1])]
    rows = [captured[n] for n in rows_names if captured[n].rank == 2 and constant_of(captured[n]) is None]
    if len(rows) != 1 or len(rows[0].uses) != 1:
        return None
    nodes, weights, gathered = [concat, loop], None, rows[0]
    if gathered.producer is not None and gathered.producer.op == Op.MUL:
        mul = gathered.producer
        nodes.append(mul)
        gathered, scale = mul.input(0), mul.input(1)
        ones = constant_of(scale)
        if ones is None:
            unsqueeze = scale.producer
            if (
                unsqueeze is None
                or unsqueeze.op != Op.UNSQUEEZE
                or unsqueeze.attrs.get("axes") not in ((1,), (-1,))
            ):
                return None
            weights = _block(unsqueeze.input(0))
            if weights is None:
                return None
        elif not np.all(ones.numpy() == 1):
            return None
    lookup = gathered.producer
    if (
        lookup is None
        or lookup.op != Op.GATHER
        or lookup.attrs.get("axis", 0) != 0
        or len(gathered.uses) != 1
    ):
        return None
    indices = _block(lookup.input(1))
    if indices is None or bags != indices.shape[0] or not _fixed_offsets(offsets, indices):
        return None
    if weights is not None and weights.shape != indices.shape:
        return None
    return _make(output, nodes + [lookup], lookup.input(0), indices, weights, mode, body)


@dataclass
class TorchscriptLoop:
    """What a TorchScript export's Loop over the bags reads, from its body: bag b is
    indices[starts[b]:ends[b]] (and weights, ``weighted``), its rows of ``table`` pooled by ``mode``."""

    body: onnx.GraphProto
    mode: str
    weighted: bool
    starts: Value | None
    ends: Value | None
    table: Value | None
    indices: Value | None
    weights: Value | None
    gathers: list  # the body's Gather nodes: the start, the end, the rows
    slices: list  # the body's Slice nodes: the indices, the weights


def torchscript_loop(loop: Node) -> TorchscriptLoop | None:
    """The Loop's parts where its body is one the TorchScript exporter writes for ``nn.EmbeddingBag``."""
    body = loop_body(loop)
    found = TORCHSCRIPT_BODIES.get(loop_fingerprint(body)) if body is not None else None
    if found is None:
        return None
    mode, weighted = found
    captured = loop_captured(loop, body)
    gathers = [n for n in body.node if n.op_type == "Gather"]
    slices = [n for n in body.node if n.op_type == "Slice"]
    return TorchscriptLoop(
        body, mode, weighted, captured.get(gathers[0].input[0]), captured.get(gathers[1].input[0]),
        captured.get(gathers[2].input[0]), captured.get(slices[0].input[0]),
        captured.get(slices[1].input[0]) if weighted else None, gathers, slices,
    )  # fmt: skip


def _torchscript_bag(output: Value, loop: Node) -> Bag | None:
    parts = torchscript_loop(loop)
    if parts is None:
        return None
    indices, weights = _block(parts.indices), _block(parts.weights) if parts.weighted else None
    starts, ends = parts.starts, parts.ends
    if parts.table is None or indices is None or (parts.weighted and weights is None):
        return None
    if parts.gathers[2].input[1] != parts.slices[0].output[0]:
        return None
    if loop_scalar(loop.input(0)) != indices.shape[0]:
        return None
    if not _fixed_offsets(starts, indices) or constant_of(ends) is None:
        return None
    if not np.array_equal(constant_of(ends).numpy(), constant_of(starts).numpy()[1:]):
        return None
    return _make(output, [loop], parts.table, indices, weights, parts.mode, parts.body)
