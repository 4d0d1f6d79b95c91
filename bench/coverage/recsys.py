"""A recommendation-style model: per-feature embedding slices, each LayerNorm → tanh, stacked, then an MLP.

One lookup into a shared table gives every sparse feature's embedding side by side ([batch, F·D], the
layout of a fused embedding-bag collection); the model splits it back into F slices, normalizes each with
its own LayerNorm and tanh, stacks them and scores the stack with an MLP, beside a dense-feature tower.
This is the shape the seed model was cut from: F identical small chains that horizontal fusion batches.
"""

from __future__ import annotations

import torch
from torch import nn


class FeatureTower(nn.Module):
    def __init__(self, features: int = 16, vocab: int = 64, dim: int = 16, dense: int = 8, hidden: int = 64):
        super().__init__()
        self.features, self.vocab, self.dim, self.dense_width = features, vocab, dim, dense
        self.table = nn.Embedding(features * vocab, dim)
        self.register_buffer("offsets", torch.arange(features) * vocab, persistent=False)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(features))
        self.dense = nn.Sequential(nn.Linear(dense, dim), nn.ReLU())
        self.mlp = nn.Sequential(nn.Linear((features + 1) * dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, ids: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        batch = ids.shape[0]
        flat = self.table(ids + self.offsets).reshape(batch, self.features * self.dim)
        slices = torch.split(flat, self.dim, dim=1)
        embedded = torch.stack([torch.tanh(norm(s)) for norm, s in zip(self.norms, slices, strict=True)], 1)
        tokens = torch.cat([embedded, self.dense(dense).unsqueeze(1)], dim=1)
        return torch.sigmoid(self.mlp(tokens.flatten(1)))

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(0, self.vocab, (batch, self.features), generator=generator)
        return ids, torch.randn(batch, self.dense_width, generator=generator)
