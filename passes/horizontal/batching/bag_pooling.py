"""N bag lookups pooled as one: their tables concatenated once, each feature's indices moved to its rows.

The concatenated table is the only copy made (at optimize time; the original tables are no longer
read). Indices out of range keep failing as they did: an index outside *its own* table is mapped past
the end of the concatenated one, where the runtime's bounds check raises as it did on the original
lookup. ONNX ``Gather`` reads -V..-1 from the end of its table (kept); torch rejects negative indices
(kept: they are mapped past the end too).
"""

from __future__ import annotations

import numpy as np

from graphopt.ir import Graph, Value
from graphopt.rewrite import Builder

from .bag import Bag
from .tables import join_tables

# Kernels of the batched form besides the pooling: the indices' stack, two comparisons, an addition
# and two selections; three more (comparison, addition, selection) where negative indices wrap.
INDEX_KERNELS = 6
WRAP_KERNELS = 3


def pooled_kernels(graph: Graph, bags: list[Bag]) -> int:
    """About the launches of ``pool``'s nodes: index arithmetic, stacked weights, the pooling (one
    _embedding_bag in torch; Gather, Mul, ReduceSum in ONNX)."""
    weighted = bags[0].weights is not None
    pooling = 1 if graph.meta.get("frontend") != "onnx" else 2 + weighted
    return INDEX_KERNELS + WRAP_KERNELS * bags[0].wraps_negative + weighted + pooling


def pool(graph: Graph, b: Builder, bags: list[Bag], axis: int) -> Value:
    """One embedding_bag on the bags' tables concatenated: [.., N, ..] with the N results on ``axis``."""
    n = len(bags)
    table, tables, rows = join_tables(graph, b, [bag.table for bag in bags], "embedding_bag_tables")

    index_type = bags[0].indices.dtype
    spread = [1, 1, 1]
    spread[axis] = n  # one value per feature, broadcast over the stacked [.., N, .., L] indices

    def per_feature(values, name):
        return b.constant(np.asarray(values).reshape(spread), graph.fresh_name(name), index_type)

    sizes = per_feature([bag.table.shape[0] for bag in bags], "table_rows")
    offsets = per_feature([tables[bag.table] for bag in bags], "table_offsets")
    zero = b.constant(np.asarray(0), graph.fresh_name("zero"), index_type)
    past_end = b.constant(np.asarray(rows), graph.fresh_name("past_end"), index_type)
    indices = b.stack(*(bag.indices for bag in bags), axis=axis)
    if bags[0].wraps_negative:
        indices = b.where(b.less(indices, zero), b.add(indices, sizes), indices)
    # In range of its own table: shifted to its rows; out of range: past the end, where the runtime's
    # bounds check fails as it did on the original lookup.
    shifted = b.where(b.less(indices, sizes), b.add(indices, offsets), past_end)
    shifted = b.where(b.less(indices, zero), past_end, shifted)
    weights = None
    if bags[0].weights is not None:
        weights = b.stack(*(bag.weights for bag in bags), axis=axis)
    starts = None
    if all(isinstance(d, int) for d in shifted.shape):
        size = shifted.shape[-1]
        count = int(np.prod(shifted.shape))
        starts = b.constant(np.arange(0, count, size), graph.fresh_name("bag_offsets"), index_type)
    return b.embedding_bag(table, shifted, weights, starts, mode=bags[0].mode)
