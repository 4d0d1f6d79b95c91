"""eliminate_common_subexpressions: two nodes that compute the same canonical op on the same inputs
with the same attributes become one.

Python code often repeats itself (``(x - mean) ** 2`` and ``(x - mean) / std`` compute ``x - mean``
twice) and torch.export keeps every repetition; the ONNX exporters merge them. Merging here lets the
norm and activation patterns, which expect one ``x - mean`` read twice, match both.
"""

from __future__ import annotations

from graphopt.ir import Graph, constant_of, is_canonical
from graphopt.ir.attrs import frozen
from graphopt.ir.ops import COMMUTATIVE
from graphopt.rewrite import Pass, RewriteStats

# Constants up to this many elements count as the same input when their values are equal: exporters
# give each use of a scalar (the 0.5 of a GELU, a norm's epsilon) its own initializer or Constant.
SMALL_CONSTANT = 64


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    seen: dict[tuple, object] = {}
    identities: dict[object, object] = {}  # (a constant read by many nodes is hashed once)

    def identity(value):
        if value is None:
            return None
        if value.const is None and (value.producer is None or value.producer.op != "constant"):
            return id(value)  # (not a constant: the common case, answered without a lookup)
        if value not in identities:
            identities[value] = _identity(value)
        return identities[value]

    for node in graph:
        if not is_canonical(node.op) or node.meta.get("side_effects") or not node.outputs:
            continue
        inputs = [identity(v) for v in node.inputs]
        if node.op in COMMUTATIVE:
            inputs.sort(key=repr)  # (x * s and s * x are one product)
        key = (node.op, tuple(inputs), frozen(node.attrs))
        first = seen.setdefault(key, node)
        if first is node or any(graph.is_output(v) for v in node.outputs):
            continue
        for duplicate, original in zip(node.outputs, first.outputs, strict=True):
            graph.replace_all_uses(duplicate, original, new_is_earlier=True)  # (seen first)
        graph.erase(node)
        stats.counts["merged_duplicate"] += 1
    return stats


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
    return ("constant", str(array.dtype), array.shape, array.tobytes())


PASS = Pass(
    "eliminate_common_subexpressions",
    "Merge nodes that compute the same canonical op on the same inputs.",
    run,
)

# Once more after recognition, batching and reshape collapsing: two spellings of one activation of one
# value (``F.silu(x)`` and ``x * sigmoid(x)``) become two equal ops only then, two batched groups that
# split one source each view it the same way, and values that differed by a no-op reshape are equal.
# Left apart, they are written back as two spellings or views that the next run merges, so a second
# run would change the model.
AFTER_RECOGNITION = Pass(
    "merge_recognized_duplicates",
    "Merge equal ops that recognition and batching made (two spellings of one activation of one value).",
    run,
)
