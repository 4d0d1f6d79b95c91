"""Small embedding models of the batch_embedding_lookups tests."""

from __future__ import annotations

import torch

FEATURES = 12  # lookups with nothing after them: enough of them that batching saves launches


class StackedLookups(torch.nn.Module):
    """N tables looked up and stacked as they are: the lookups' values reach the output unchanged."""

    def __init__(self, rows, d=8):
        super().__init__()
        self.tables = torch.nn.ModuleList(torch.nn.Embedding(r, d) for r in rows)

    def forward(self, *ids):
        return torch.stack([table(i) for table, i in zip(self.tables, ids, strict=True)])


def ids_for(rows, batch=6, seed=0):
    """Random in-range indices of each table."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randint(0, r, (batch,), generator=generator) for r in rows)
