"""EmbeddingLookups: Y[k, ...] = Table[Offsets[k] + Indices[k, ...]], each index checked against its own
feature's table.

N features, each with its own embedding table, their tables stored one after another in Table (a copy
made once, when the model is optimized): feature k's table is rows Offsets[k] .. Offsets[k] + Sizes[k]
- 1. One kernel maps every feature's indices to rows of Table and copies the rows, where the original
took N lookups (or, written with standard ops, a stack of the indices, the offset arithmetic and the
bounds mapping, then one Gather).

An index outside its own feature's table [0, Sizes[k]) is out of range, exactly where the original
lookup on that feature's table was (never a neighbour's row); with ``wrap_negative`` (ONNX Gather's
rule) -Sizes[k] .. -1 count from the end of the feature's table first. What an out-of-range index does is
what the original lookup did in the same runtime:

- torch on a CPU: IndexError "index out of range in self", from the same native lookup;
- torch on CUDA: the original's device-side assert fails its launch and loses the CUDA context; the
  kernel's device-side trap does the same;
- ONNX Runtime's CPU EP with graphopt's library: Gather's error, "indices element out of data bounds,
  idx=I must be within the inclusive range [-V,V-1]", I and V the feature's own (V its table's rows);
- ONNX Runtime's CUDA EP with graphopt's library: a row of zeros, as ONNX Runtime's CUDA Gather gives;
- ONNX Runtime without the library (the fallback function): the CPU EP fails with Gather's error, I
  and V those of the concatenated table (the index mapped past its end); the CUDA EP gives zeros.
"""

from __future__ import annotations

from graphopt.fused.spec import INDEX, INT64, Attribute, FusedOp, Port, TorchForm


def source_rows(indices, offsets, sizes, *, wrap_negative):
    """The rows of Table that Indices name (int64, Indices' shape); raises IndexError for an index
    outside its feature's table, naming the feature, the index and the valid range."""
    import numpy as np

    indices = np.asarray(indices, dtype=np.int64)
    offsets, sizes = np.asarray(offsets, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
    if indices.ndim < 1 or offsets.shape != (indices.shape[0],) or sizes.shape != offsets.shape:
        raise ValueError(f"indices {indices.shape} need one offset and one size per feature (dim 0)")
    spread = (-1,) + (1,) * (indices.ndim - 1)
    size = sizes.reshape(spread)
    index = np.where(indices < 0, indices + size, indices) if wrap_negative else indices
    bad = (index < 0) | (index >= size)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        low = -int(sizes[where[0]]) if wrap_negative else 0
        raise IndexError(
            f"feature {where[0]}: index {int(indices[where])} is out of range "
            f"[{low}, {int(sizes[where[0]]) - 1}] of its table"
        )
    return index + offsets.reshape(spread)


def reference(table, indices, offsets, sizes, *, wrap_negative):
    """The looked-up rows, exactly (in the table's own dtype): [*Indices.shape, D]."""
    import numpy as np

    return np.asarray(table)[source_rows(indices, offsets, sizes, wrap_negative=wrap_negative)]


def _shapes(present, shapes):
    """Y is Indices.shape + [D] (D = Table.shape[1])."""
    table, indices = shapes[0], shapes[1]
    if indices is None:
        return [None]
    width = table[1] if table is not None and len(table) == 2 else None
    return [(*indices, width)]


def _describe(attrs, present) -> list[str]:
    return ["negative indices wrap" if attrs.get("wrap_negative") else "negative indices fail"]


EMBEDDING_LOOKUPS = FusedOp(
    name="EmbeddingLookups",
    ir_name="embedding_lookups",
    package=__package__,
    doc=(
        "Y[k, ...] = Table[Offsets[k] + Indices[k, ...]]: N features' embedding lookups on their tables "
        "stored one after another in Table, feature k's table the Sizes[k] rows from Offsets[k]. An index "
        "outside [0, Sizes[k]) of its own feature is out of range, as it was on the feature's own table; "
        "with wrap_negative, -Sizes[k]..-1 count from the end of that table first (ONNX Gather's rule). "
        "Rows are copied exactly."
    ),
    inputs=(
        Port("Table", doc="[R, D]: the features' tables, one after another"),
        Port("Indices", doc="[N, *S] int32 or int64: feature k's indices at Indices[k]", element=INDEX),
        Port("Offsets", doc="[N] int64: the first row of feature k's table in Table", element=INT64),
        Port("Sizes", doc="[N] int64: the rows of feature k's table", element=INT64),
    ),
    outputs=(Port("Y", doc="[N, *S, D], of Table's type"),),
    attributes=(
        Attribute(
            "wrap_negative",
            int,
            0,
            "1: indices -Sizes[k]..-1 count from the end of feature k's table "
            "(ONNX Gather); 0: negative indices are out of range (torch's embedding)",
            tag="wrap{}",
        ),
    ),
    torch_forms=(TorchForm("embedding_lookups", ("Table", "Indices", "Offsets", "Sizes"), ("Y",)),),
    shape_rule=_shapes,
    describe=_describe,
    reference=reference,
)
