"""eliminate_common_subexpressions: two nodes that compute the same canonical op on the same inputs
with the same attributes become one.

Python code often repeats itself (``(x - mean) ** 2`` and ``(x - mean) / std`` compute ``x - mean``
twice) and torch.export keeps every repetition; the ONNX exporters merge them. Merging here lets the
norm and activation patterns, which expect one ``x - mean`` read twice, match both.

Not a node that reads memory an in-place op writes (a torch program's ``mask[2:] = 2.0``): two reads of
that value on either side of the write see different contents, though they read one IR value.
"""

from __future__ import annotations

import functools

from graphopt.ir import Graph, Node, Value, constant_of, is_canonical
from graphopt.ir.attrs import frozen
from graphopt.ir.ops import COMMUTATIVE
from graphopt.rewrite import Pass, RewriteStats

# Constants up to this many elements count as the same input when their values are equal: exporters
# give each use of a scalar (the 0.5 of a GELU, a norm's epsilon) its own initializer or Constant.
SMALL_CONSTANT = 64


def run(graph: Graph) -> RewriteStats:
    """Merges each node into the first node (in graph order) with the same key: op, input identities
    and attributes.

    Only a node whose anchor (see ``_anchor``) an earlier node also has can equal an earlier node, so
    the key, the costly part, is computed only for those (a third of the nodes of a typical graph):
    the first node with an anchor is keyed when a second one comes. This needs a topological order:
    then a node's inputs, and so its key, no longer change once its turn has passed (a merge rewires
    the readers of a later node only).
    """
    graph.sort()  # (a no-op in the pipeline, which sorts after every pass)
    stats = RewriteStats()
    mutable = _written_in_place(graph)
    seen: dict[tuple, Node] = {}
    unkeyed: dict[Value, Node] = {}  # anchor -> the one node so far with it, not keyed yet
    keyed: set[Value] = set()  # anchors whose nodes are all in ``seen``
    identities: dict[Value, object] = {}  # (a constant read by many nodes is hashed once)

    def identity(value):
        if value is None:
            return None
        if not _is_constant(value):
            return id(value)  # (not a constant: the common case, answered without a lookup)
        if value not in identities:
            identities[value] = _identity(value)
        return identities[value]

    def key_of(node):
        inputs = [identity(v) for v in node.inputs]
        if node.op in COMMUTATIVE:
            inputs.sort(key=repr)  # (x * s and s * x are one product)
        return (node.op, tuple(inputs), frozen(node.attrs))

    for node in graph:
        if not is_canonical(node.op) or node.meta.get("side_effects") or not node.outputs:
            continue
        if mutable and any(v in mutable for v in node.inputs):
            continue  # (what it reads depends on where it runs between the writes)
        anchor = _anchor(node)
        if anchor is not None and anchor not in keyed:
            earlier = unkeyed.pop(anchor, None)
            if earlier is None:
                unkeyed[anchor] = node  # the first with this anchor: no earlier node equals it
                continue
            keyed.add(anchor)
            seen.setdefault(key_of(earlier), earlier)
        first = seen.setdefault(key_of(node), node)
        if first is node or any(graph.is_output(v) for v in node.outputs):
            continue
        for duplicate, original in zip(node.outputs, first.outputs, strict=True):
            graph.replace_all_uses(duplicate, original, new_is_earlier=True)  # (seen first)
        graph.erase(node)
        stats.counts["merged_duplicate"] += 1
    return stats


def _is_constant(value: Value) -> bool:
    return value.const is not None or (value.producer is not None and value.producer.op == "constant")


def _written_in_place(graph: Graph) -> set[Value]:
    """The values whose memory an in-place op writes: the tensor each mutating node writes, the views
    it was taken through, and every view of those, down from the tensor that owns the memory."""
    aliasing = [n for n in graph if n.meta.get("mutates")]
    if not aliasing:
        return set()

    def aliases(node: Node) -> bool:
        return bool(node.meta.get("aliases_input") or node.meta.get("mutates"))

    roots = []
    for node in aliasing:
        value = node.input(0)
        while value is not None and value.producer is not None and aliases(value.producer):
            value = value.producer.input(0)
        roots.append(value)
    written: set[Value] = set()
    stack = [v for v in roots if v is not None]
    while stack:
        value = stack.pop()
        if value in written:
            continue
        written.add(value)
        for use in value.uses:
            if use.index == 0 and aliases(use.node):
                stack.extend(use.node.outputs)
    return written


def _anchor(node: Node) -> Value | None:
    """Of the inputs that are not constants, the one with the least id; None if there is none.

    Nodes with equal keys read the same such inputs (a key holds their ids), in any order for
    commutative ops, so they have the same anchor: only nodes with one anchor need comparing.
    """
    anchor = None
    for value in node.inputs:
        if value is not None and not _is_constant(value) and (anchor is None or id(value) < id(anchor)):
            anchor = value
    return anchor


def _identity(value) -> object:
    """What makes two inputs the same: the value itself, or a small constant's dtype, shape and bytes.

    (Without the second, two identical spelled-out activations of one value stay apart here, become
    two activation ops, and are written back as two spellings whose first steps the next run merges:
    optimizing twice would differ from optimizing once.)"""
    if value is None:
        return None
    tensor = constant_of(value)
    if tensor is None or tensor.nbytes > SMALL_CONSTANT * 8:
        return id(value)
    array = tensor.numpy()
    return ("constant", _dtype_text(array.dtype), array.shape, array.tobytes())


@functools.cache
def _dtype_text(dtype) -> str:
    return str(dtype)  # (NumPy spells a dtype in Python, at microseconds a call: once per dtype here)


PASS = Pass(
    "eliminate_common_subexpressions",
    "Merge nodes that compute the same canonical op on the same inputs.",
    run,
)
