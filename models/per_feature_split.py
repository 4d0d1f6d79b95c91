"""The seed written with one LayerNorm per feature: split a flat vector into N slices, each slice's own
LayerNorm (own scale and bias) → tanh, stack, then a shared Linear(D, 1) → ReLU, or each feature's own
Linear(D, h) (``hidden=h``).

After horizontal batching the norms are one LayerNorm of [N, B, D] whose scale and bias are
[N, 1, D]: one row per feature (``graphopt.fused.broadcast_rows``). The shared-norm seed is
``models/split_stack.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from models.seeding import randn, seeded


def _random_norm(d: int, generator: torch.Generator) -> nn.LayerNorm:
    """A LayerNorm whose scale and bias are far from 1 and 0, so a fusion that dropped or shared
    them would show in the numerics."""
    norm = nn.LayerNorm(d)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.5 * torch.randn(d, generator=generator))
        norm.bias.copy_(0.5 * torch.randn(d, generator=generator))
    return norm


class PerFeatureSplitStack(nn.Module):
    def __init__(self, n: int, b: int, d: int, hidden: int | None = None, seed: int = 0):
        super().__init__()
        self.n, self.b, self.d, self.hidden = n, b, d, hidden
        generator = torch.Generator().manual_seed(seed)
        self.norms = nn.ModuleList(_random_norm(d, generator) for _ in range(n))
        if hidden is None:
            self.linear = seeded(seed, lambda: nn.Linear(d, 1))
        else:
            self.linears = seeded(seed, lambda: nn.ModuleList(nn.Linear(d, hidden) for _ in range(n)))

    def forward(self, input_data: torch.Tensor) -> torch.Tensor:
        slices = torch.split(input_data, self.d * self.b)
        pairs = zip(self.norms, slices, strict=True)
        features = [torch.tanh(norm(s.view(self.b, self.d))) for norm, s in pairs]
        if self.hidden is None:
            return nn.functional.relu(self.linear(torch.stack(features)))
        return torch.stack([linear(f) for linear, f in zip(self.linears, features, strict=True)])


def example_inputs(n: int, b: int, d: int, seed: int = 1) -> tuple[torch.Tensor]:
    return (randn(n * b * d, seed=seed),)
