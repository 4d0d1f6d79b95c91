"""MLPs made of norm → activation blocks, the shapes the vertical-fusion rules look for.

Variants:
- `norm="layer", act="gelu"`: Linear → LayerNorm → GELU (the common transformer MLP tail);
- `norm="rms", act="silu"`: Linear → RMSNorm → SiLU;
- `residual=True`: the block's input is added to the Linear output before the norm
  (`norm(x + linear(x))`), so a fused add-norm-act rule has something to match.
"""

from __future__ import annotations

import torch
from torch import nn

from models.seeding import randn, seeded

NORMS = {
    "layer": lambda dim: nn.LayerNorm(dim, eps=1e-5),
    # An explicit eps: RMSNorm's default (None) means "finfo(dtype).eps", which exporters spell differently.
    "rms": lambda dim: nn.RMSNorm(dim, eps=1e-6),
}
ACTIVATIONS = {
    "gelu": nn.GELU,
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
}


class NormActBlock(nn.Module):
    def __init__(self, dim: int, norm: str = "layer", act: str = "gelu", residual: bool = False):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.norm = NORMS[norm](dim)
        self.act = ACTIVATIONS[act]()
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.residual:
            h = x + h
        return self.act(self.norm(h))


class MLP(nn.Module):
    def __init__(
        self,
        d_in: int = 16,
        hidden: int = 32,
        d_out: int = 8,
        depth: int = 2,
        norm: str = "layer",
        act: str = "gelu",
        residual: bool = False,
    ):
        super().__init__()
        self.proj_in = nn.Linear(d_in, hidden)
        self.blocks = nn.Sequential(*(NormActBlock(hidden, norm, act, residual) for _ in range(depth)))
        self.proj_out = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_out(self.blocks(self.proj_in(x)))


def make_mlp(seed: int = 0, **config) -> MLP:
    """An `MLP(**config)` in eval mode with weights drawn from `seed`."""
    return seeded(seed, lambda: MLP(**config).eval())


def example_inputs(batch: int = 4, d_in: int = 16, seed: int = 1) -> tuple[torch.Tensor]:
    return (randn(batch, d_in, seed=seed),)
