"""EmbeddingLookups in plain PyTorch: the rows through torch's own embedding lookup (its CPU
implementation, and an eager call's that needs a gradient), and the gradient of the table."""

from __future__ import annotations

import torch
from torch import Tensor


def source_rows(table: Tensor, indices: Tensor, offsets: Tensor, sizes: Tensor, wrap_negative: int) -> Tensor:
    """The rows of ``table`` each index names (int64, ``indices``' shape). An index outside its own
    feature's table becomes ``table.shape[0]``, one past the last row: the lookup's own bounds check
    then fails on it as it did on the feature's own table."""
    spread = (-1,) + (1,) * (indices.dim() - 1)
    size, first = sizes.view(spread), offsets.view(spread)
    index = indices.to(torch.int64)
    if wrap_negative:
        index = torch.where(index < 0, index + size, index)
    return torch.where((index >= 0) & (index < size), index + first, table.shape[0])


def embedding_lookups(table, indices, offsets, sizes, wrap_negative: int) -> Tensor:
    """[*indices.shape, D]; an index out of range raises what ``torch.embedding`` raises for it."""
    return torch.embedding(table, source_rows(table, indices, offsets, sizes, wrap_negative))


def table_grad(grad: Tensor, rows: Tensor, table_rows: int) -> Tensor:
    """d loss / d table: each looked-up row's gradient summed into its row, as torch's embedding does."""
    return torch.ops.aten.embedding_dense_backward(grad, rows, table_rows, -1, False)
