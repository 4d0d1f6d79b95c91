"""EmbeddingLookups' ONNX fallback body: the index arithmetic and one Gather, in standard ops.

Each feature's indices move to its rows of Table; an index outside its own feature's table is moved past
the end of Table instead (never onto a neighbour's rows), where Gather's own bounds check does what it
did on the original lookup (the CPU EP fails; the CUDA EP gives zeros). The body does not know the
rank of Indices: it works on Indices as [N, M] and restores the shape at the end.
"""

from __future__ import annotations

from onnx import TensorProto

from graphopt.fused.onnx_decompose import Body

INT64_MAX = (1 << 63) - 1


def _dims(b: Body, x: str, start: int, end: int) -> str:
    """x.shape[start:end] as a 1-D int64 tensor (Slice of Shape: Shape's own start/end need opset 15)."""
    return b.op("Slice", b.op("Shape", x), b.ints([start]), b.ints([end]))


def body(b: Body) -> list[str]:
    indices = b.op("Cast", b.op("Reshape", "Indices", b.ints([0, -1])), to=TensorProto.INT64)  # [N, M]
    one = b.ints([1])
    size, first = b.op("Unsqueeze", "Sizes", one), b.op("Unsqueeze", "Offsets", one)  # [N, 1]
    zero = b.op("Constant", value_int=0)
    if b.variant.attr("wrap_negative"):
        indices = b.op("Where", b.op("Less", indices, zero), b.op("Add", indices, size), indices)
    found = b.op("And", b.op("Not", b.op("Less", indices, zero)), b.op("Less", indices, size))
    past_end = _dims(b, "Table", 0, 1)  # [R]: one row past the last
    rows = b.op("Where", found, b.op("Add", indices, first), past_end)
    looked_up = b.op("Gather", "Table", rows, axis=0)  # [N, M, D]
    shape = b.op("Concat", b.op("Shape", "Indices"), _dims(b, "Table", 1, INT64_MAX), axis=0)
    b.op("Reshape", looked_up, shape, output="Y")
    return ["Y"]
