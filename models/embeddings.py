"""Recommendation models written the way their engineers write them: one embedding table per feature.

- `EmbeddingStack`: the seed with its embedding front. N tables (different vocabularies, one width D)
  → LayerNorm → tanh per feature → stack → Linear(D, 1) → ReLU. ``shared_norm`` selects one LayerNorm
  for every feature (else one per feature, each with its own scale and bias). ``bag`` > 0 makes each
  table an ``nn.EmbeddingBag`` (sum) of that many ids per row: indices [B, bag].
- `HandBatched`: the same function written by hand as one lookup on one concatenated table (what
  table-batched embeddings do), for the benchmark's "combined".
- `Dlrm`: a DLRM-style model: dense features through a bottom MLP, N sparse features through
  ``nn.EmbeddingBag``, pairwise dot-product interaction, top MLP. ``jagged`` gives each feature's ids
  as one flat tensor with the offsets of its bags (bags of different sizes, empty ones included:
  ``include_last_offset`` with ``last_offset``), as production inputs come.
- `HandBatchedDlrm`: the same function with one ``nn.EmbeddingBag`` on one concatenated table (what
  table-batched embeddings do), for the benchmark's "combined".
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from models.seeding import seeded

WEIGHT_SEED = 0
INPUT_SEED = 1


def vocab_sizes(n: int, smallest: int = 50) -> list[int]:
    """Different vocabulary sizes, as real features have."""
    return [smallest + 37 * i for i in range(n)]


class EmbeddingStack(nn.Module):
    def __init__(
        self, n: int = 8, d: int = 64, shared_norm: bool = True, smallest_vocab: int = 50, bag: int = 0
    ):
        super().__init__()
        self.shared_norm = shared_norm

        def table(rows):
            return nn.EmbeddingBag(rows, d, mode="sum") if bag else nn.Embedding(rows, d)

        def build():
            self.tables = nn.ModuleList(table(rows) for rows in vocab_sizes(n, smallest_vocab))
            norms = 1 if shared_norm else n
            self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(norms))
            for norm in self.norms:  # not the identity a fresh LayerNorm is
                nn.init.normal_(norm.weight, 1.0, 0.1)
                nn.init.normal_(norm.bias, 0.0, 0.1)
            self.linear = nn.Linear(d, 1)

        seeded(WEIGHT_SEED, build)

    def forward(self, *indices: torch.Tensor) -> torch.Tensor:
        features = []
        for i, (table, ids) in enumerate(zip(self.tables, indices, strict=True)):
            norm = self.norms[0 if self.shared_norm else i]
            features.append(torch.tanh(norm(table(ids))))
        return nn.functional.relu(self.linear(torch.stack(features)))


class HandBatched(nn.Module):
    """`EmbeddingStack` (shared norm) by hand: one table, per-feature row offsets, one 3-D chain."""

    def __init__(self, original: EmbeddingStack):
        super().__init__()
        if not original.shared_norm:
            raise ValueError("HandBatched writes the shared-norm model")
        weights = [table.weight.detach() for table in original.tables]
        self.table = nn.Embedding.from_pretrained(torch.cat(weights), freeze=True)
        rows = torch.tensor([0] + [w.shape[0] for w in weights[:-1]])
        self.register_buffer("offsets", torch.cumsum(rows, 0).view(-1, 1))
        self.norm = original.norms[0]
        self.linear = original.linear

    def forward(self, *indices: torch.Tensor) -> torch.Tensor:
        ids = torch.stack(indices) + self.offsets
        return nn.functional.relu(self.linear(torch.tanh(self.norm(self.table(ids)))))


def example_indices(
    n: int = 8, batch: int = 32, smallest_vocab: int = 50, seed: int = INPUT_SEED, bag: int = 0
) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    sizes = vocab_sizes(n, smallest_vocab)
    shape = (batch, bag) if bag else (batch,)
    return tuple(torch.randint(0, rows, shape, generator=generator) for rows in sizes)


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    """DLRM: bottom MLP on dense features, an EmbeddingBag per sparse feature, dot interaction, top MLP."""

    def __init__(
        self,
        n: int = 8,
        d: int = 16,
        dense: int = 13,
        mode: str = "sum",
        weighted: bool = False,
        smallest_vocab=50,
        jagged: bool = False,
        last_offset: bool = False,
    ):
        super().__init__()
        self.weighted, self.jagged = weighted, jagged

        def build():
            self.bottom = _mlp([dense, 64, d])
            sizes = vocab_sizes(n, smallest_vocab)
            self.bags = nn.ModuleList(
                nn.EmbeddingBag(rows, d, mode=mode, include_last_offset=last_offset) for rows in sizes
            )
            pairs = (n + 1) * n // 2
            self.top = nn.Sequential(_mlp([d + pairs, 64]), nn.Linear(64, 1))
            rows, cols = torch.tril_indices(n + 1, n + 1, offset=-1)
            self.register_buffer("rows", rows, persistent=False)
            self.register_buffer("cols", cols, persistent=False)

        seeded(WEIGHT_SEED, build)

    def forward(self, dense: torch.Tensor, *sparse: torch.Tensor) -> torch.Tensor:
        """``sparse``: the N features' ids ([B, L] each; jagged: [T_k]), then (jagged) their N offsets,
        then (weighted) their N per-sample weights."""
        x = self.bottom(dense)
        pooled = [bag(*feature) for bag, feature in zip(self.bags, self.features(sparse), strict=True)]
        features = torch.stack([x, *pooled], dim=1)  # [B, N + 1, D]
        dots = torch.bmm(features, features.transpose(1, 2))
        interactions = dots[:, self.rows, self.cols]
        return torch.sigmoid(self.top(torch.cat([x, interactions], dim=1)))

    def features(self, sparse):
        """Each feature's EmbeddingBag arguments: (ids, offsets or None, weights or None)."""
        n = len(self.bags)
        parts = [sparse[i * n : (i + 1) * n] for i in range(1 + self.jagged + self.weighted)]
        ids = parts[0]
        offsets = parts[1] if self.jagged else [None] * n
        weights = parts[-1] if self.weighted else [None] * n
        return list(zip(ids, offsets, weights, strict=True))


class HandBatchedDlrm(nn.Module):
    """`Dlrm` by hand: its N bags pooled by one EmbeddingBag on the tables concatenated, per-feature
    row offsets added to the [B, N, L] stacked ids."""

    def __init__(self, original: Dlrm):
        super().__init__()
        weights = [bag.weight.detach() for bag in original.bags]
        mode = original.bags[0].mode
        self.bag = nn.EmbeddingBag.from_pretrained(torch.cat(weights), freeze=True, mode=mode)
        rows = torch.tensor([0] + [w.shape[0] for w in weights[:-1]])
        self.register_buffer("offsets", torch.cumsum(rows, 0).view(1, -1, 1))
        self.original, self.weighted, self.n = original, original.weighted, len(weights)

    def forward(self, dense: torch.Tensor, *sparse: torch.Tensor) -> torch.Tensor:
        o = self.original
        x = o.bottom(dense)
        if o.jagged:
            pooled = self._jagged(o.features(sparse), x.shape[0])
        else:
            ids = torch.stack(sparse[: self.n], dim=1) + self.offsets  # [B, N, L]
            batch, n, size = ids.shape
            weights = torch.stack(sparse[self.n :], dim=1).reshape(-1, size) if self.weighted else None
            pooled = self.bag(ids.reshape(-1, size), per_sample_weights=weights).view(batch, n, -1)
        features = torch.cat([x.unsqueeze(1), pooled], dim=1)
        dots = torch.bmm(features, features.transpose(1, 2))
        interactions = dots[:, o.rows, o.cols]
        return torch.sigmoid(o.top(torch.cat([x, interactions], dim=1)))

    def _jagged(self, features, batch: int) -> torch.Tensor:
        """[B, N, D]: the N features' ids moved to their tables' rows and concatenated, each feature's
        offsets moved past the ids before it: one EmbeddingBag over all N·B bags."""
        ids = torch.cat([i + self.offsets[0, k, 0] for k, (i, _, _) in enumerate(features)])
        counts = torch.tensor([0] + [len(i) for i, _, _ in features[:-1]], device=ids.device)
        firsts = torch.cumsum(counts, 0)
        starts = torch.cat([o[:batch] + firsts[k] for k, (_, o, _) in enumerate(features)])
        weights = torch.cat([w for _, _, w in features]) if self.weighted else None
        pooled = self.bag(ids, starts, per_sample_weights=weights)  # [N·B, D]
        return pooled.view(self.n, batch, -1).transpose(0, 1)


def dlrm_inputs(
    n: int = 8,
    batch: int = 32,
    bag: int = 4,
    dense: int = 13,
    weighted: bool = False,
    smallest_vocab: int = 50,
) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(INPUT_SEED)
    x = torch.randn(batch, dense, generator=generator)
    sizes = vocab_sizes(n, smallest_vocab)
    ids = tuple(torch.randint(0, rows, (batch, bag), generator=generator) for rows in sizes)
    weights = tuple(torch.rand(batch, bag, generator=generator) for _ in range(n)) if weighted else ()
    return (x, *ids, *weights)


def jagged_dlrm_inputs(
    n: int = 8,
    batch: int = 32,
    bag: int = 4,
    dense: int = 13,
    weighted: bool = False,
    smallest_vocab: int = 50,
    last_offset: bool = False,
    seed: int = INPUT_SEED,
) -> tuple[torch.Tensor, ...]:
    """`Dlrm` (jagged) inputs: dense [B, dense], then per feature bag·B ids (a count that does not
    change with ``seed``, as an exported program's static shapes want) cut into B bags of random
    sizes, then their offsets ([B + 1] with ``last_offset``), then (weighted) per-sample weights. The
    first bag of each feature and one in the middle are empty; so is the last where B allows."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dense, generator=generator)
    total = batch * bag
    ids, offsets = [], []
    for rows in vocab_sizes(n, smallest_vocab):
        ids.append(torch.randint(0, rows, (total,), generator=generator))
        cuts = torch.sort(torch.randint(0, total + 1, (batch - 1,), generator=generator)).values
        starts = torch.cat([torch.zeros(1, dtype=torch.long), cuts])
        starts[1] = 0  # (bag 0 empty)
        starts[batch // 2] = starts[batch // 2 - 1]  # (a bag in the middle empty)
        if batch > 3:
            starts[-1] = total  # (the last bag empty)
        offsets.append(torch.cat([starts, torch.tensor([total])]) if last_offset else starts)
    weights = [torch.rand(total, generator=generator) for _ in range(n)] if weighted else []
    return (x, *ids, *offsets, *weights)
