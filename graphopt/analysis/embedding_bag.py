"""The pooled embedding lookup (``Op.EMBEDDING_BAG``): its reference value (its shape rule is in
graphopt/ir/infer.py).

Inputs: ``table`` [V, D], ``indices`` [..., L] (each row of L indices is one bag), ``weights``
[..., L] or None (torch's per_sample_weights: row i of the bag is scaled by its weight before the
sum), ``offsets`` or None. The output is [..., D]: the bag's rows summed (``mode`` "sum") or averaged
("mean"). Bags are of one size L, so none is empty. ``offsets``, where given, is the constant
arange(0, numel(indices), L): the start of each bag in the flattened indices, the argument torch's
``_embedding_bag`` takes, held as a constant of the graph so that it lives on the table's device.
An index outside [0, V) is an error in every backend form (the passes that make this op map indices
that the original wrapped, or that were out of their own table, before it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..ir import Node


def evaluate(node: Node, table, indices, weights=None, offsets=None) -> np.ndarray:
    rows = np.take(table, indices, axis=0)  # [..., L, D]
    if weights is not None:
        rows = rows * weights[..., None]
    pooled = rows.sum(axis=-2) if node.attrs["mode"] == "sum" else rows.mean(axis=-2)
    return pooled.astype(table.dtype)
