"""join_slices_into_split: slices that cut one tensor into consecutive pieces along one axis become
one split.

CvT reads its class token and the patch tokens as ``x[:, :1]`` and ``x[:, 1:]`` of a norm's output.
ONNX Runtime joins such slices into one Split itself (its GatherSliceToSplitFusion), but not where the
tensor comes from a node of more than one output, which a fused norm that also writes its residual sum
is: there graphopt's model ran two Slices where the original ran one Split (transformers' CvT, 2 of its
3 stages). Joined here, the pieces are one op whatever produced them, in every runtime.

Conditions: the tensor comes from a node of more than one output (after any other node ONNX Runtime
joins them itself, and with more of its own fusions in view: joined here, transformers' FocalNet's
modulation slices cost it two more Splits), every reader of the tensor that is a slice cuts the same
one axis with step 1, and the slices' static bounds tile that axis from 0 to its end without a gap or
an overlap (other readers may read the tensor too). The pieces keep their order along the axis.
"""

from __future__ import annotations

from graphopt.ir import Graph, Node, Op, Value
from graphopt.rewrite import Pass, RewriteStats, count_rewrite, may_rewrite

RULE = "join_slices_into_split"


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    sources = {s.input(0) for s in graph.nodes_of(Op.SLICE) if s.input(0) is not None}
    for x in sorted(sources, key=lambda v: v.name):
        pieces = _tiling(x)
        if pieces is None:
            continue
        if not may_rewrite():
            break
        axis, slices = pieces
        sizes = tuple(s.output.shape[axis] for s in slices)
        split = graph.add_node(Op.SPLIT, [x], {"axis": axis, "sizes": sizes}, outputs=len(slices))
        split.meta["rule"] = RULE
        for piece, old in zip(split.outputs, slices, strict=True):
            graph.replace_all_uses(old.output, piece)
            graph.erase(old)
        stats.counts[RULE] += 1
        count_rewrite(RULE, split.name)
    if stats.counts:
        graph.sort()  # (each split was appended after the nodes that now read it)
    return stats


def _tiling(x: Value) -> tuple[int, list[Node]] | None:
    """The axis and the slices of ``x`` in order along it, where they tile it; else None."""
    if x.producer is None or len(x.producer.outputs) < 2:
        return None
    slices = [n for n in x.users() if n.op == Op.SLICE]
    if len(slices) < 2 or x.shape is None:
        return None
    bounds = []
    for s in slices:
        attrs = s.attrs
        if len(s.inputs) != 1 or "axes" not in attrs or len(attrs["axes"]) != 1 or attrs["steps"] != (1,):
            return None
        axis = attrs["axes"][0]
        length = x.shape[axis] if 0 <= axis < len(x.shape) else None
        shape = s.output.shape
        if not isinstance(length, int) or shape is None or not isinstance(shape[axis], int):
            return None
        start = _clamped(attrs["starts"][0], length)
        bounds.append((axis, start, start + shape[axis], s))
    if len({axis for axis, *_ in bounds}) != 1:
        return None
    bounds.sort(key=lambda b: b[1])
    axis, length = bounds[0][0], x.shape[bounds[0][0]]
    edges = [b[1] for b in bounds] + [length]
    if edges[0] != 0 or any(b[2] != following for b, following in zip(bounds, edges[1:], strict=True)):
        return None
    if any(b[2] == b[1] for b in bounds):
        return None  # (an empty piece: nothing to join it for)
    return axis, [b[3] for b in bounds]


def _clamped(start: int, length: int) -> int:
    """A slice start as ONNX and aten read it: negative from the end, clamped into [0, length]."""
    return min(max(start + length if start < 0 else start, 0), length)


PASS = Pass(
    "join_slices_into_split",
    "Join slices that tile the output of a node of several outputs along one axis into one split (ONNX "
    "Runtime joins them only after one-output nodes).",
    run,
)
