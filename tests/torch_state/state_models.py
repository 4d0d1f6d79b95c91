"""The three kinds of model the optimized program's state is checked on: the seed, a per-feature
recommendation model (per-slice LayerNorms whose weights horizontal fusion stacks) and a transformer
block (residual + LayerNorm → GELU fusions, attention left as it is)."""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn import functional as F

from models.split_stack import SplitStack, example_input


class PerFeature(nn.Module):
    """Embedding slices, each with its own LayerNorm → tanh, stacked, scored by an MLP; a dense tower
    beside them; the feature offsets are a non-persistent buffer."""

    def __init__(self, features: int = 4, vocab: int = 16, dim: int = 8):
        super().__init__()
        self.features, self.vocab, self.dim = features, vocab, dim
        self.table = nn.Embedding(features * vocab, dim)
        self.register_buffer("offsets", torch.arange(features) * vocab, persistent=False)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(features))
        for norm in self.norms:  # (all-ones weights would be folded away, not stacked)
            nn.init.normal_(norm.weight)
            nn.init.normal_(norm.bias)
        self.dense = nn.Linear(3, dim)
        self.mlp = nn.Sequential(nn.Linear((features + 1) * dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, ids: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        flat = self.table(ids + self.offsets).reshape(ids.shape[0], self.features * self.dim)
        slices = torch.split(flat, self.dim, dim=1)
        embedded = torch.stack([torch.tanh(n(s)) for n, s in zip(self.norms, slices, strict=True)], 1)
        tokens = torch.cat([embedded, torch.relu(self.dense(dense)).unsqueeze(1)], dim=1)
        return torch.sigmoid(self.mlp(tokens.flatten(1)))


class Block(nn.Module):
    """A pre-norm transformer block: x + attention(LN(x)), then h + MLP(GELU) of LN(h)."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        for norm in (self.norm1, self.norm2):
            nn.init.normal_(norm.weight)
            nn.init.normal_(norm.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        h = x + self.proj(attended.transpose(1, 2).reshape(b, t, d))
        return h + self.down(F.gelu(self.up(self.norm2(h))))


def seed() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return SplitStack(4, 8, 16), (example_input(4, 8, 16),)


def per_feature() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 16, (6, 4), generator=generator)
    return PerFeature(), (ids, torch.randn(6, 3, generator=generator))


def block() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Block(), (torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1)),)


MODELS = {"seed": seed, "per_feature": per_feature, "transformer_block": block}


def exported(name: str) -> tuple[torch.export.ExportedProgram, tuple[torch.Tensor, ...]]:
    """A fresh export (tests move and convert modules, which share the program's tensors)."""
    module, inputs = MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), inputs), inputs
