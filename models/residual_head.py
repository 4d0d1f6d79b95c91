"""A residual block feeding a narrow head: ``h = x + f(x)``, then RMSNorm or LayerNorm → activation →
Linear(D, K) with K small (a scoring or routing head on a residual stream). ``keep_sum`` returns h
too, as a model whose later layers read the residual stream does.

The RMSNorm is spelled as decoders write it (``h * rsqrt(mean(h²) + eps) * weight``), which every
exporter takes (TorchScript's has no ``rms_norm``). The norm's weights are drawn far from 1 and 0,
so a fusion that dropped them would show in the numerics.
"""

from __future__ import annotations

import torch
from torch import nn

from models.seeding import seeded

ACTIVATIONS = {"silu": nn.functional.silu, "gelu": nn.functional.gelu, "tanh": torch.tanh, "relu": torch.relu}


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ResidualHead(nn.Module):
    def __init__(self, d: int = 64, k: int = 4, norm: str = "rms", act: str = "silu", keep_sum: bool = False,
                 seed: int = 0):  # fmt: skip
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.proj = nn.Linear(d, d)
            self.norm = RMSNorm(d) if norm == "rms" else nn.LayerNorm(d)
            self.head = nn.Linear(d, k)
            with torch.no_grad():
                self.norm.weight.copy_(1.0 + 0.5 * torch.randn(d))
                if norm != "rms":
                    self.norm.bias.copy_(0.5 * torch.randn(d))
        self.act, self.keep_sum = ACTIVATIONS[act], keep_sum

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        h = x + self.proj(x)
        y = self.head(self.act(self.norm(h)))
        return (y, h) if self.keep_sum else y


def example_inputs(batch: int = 2, tokens: int = 8, d: int = 64, seed: int = 1) -> tuple[torch.Tensor]:
    return (seeded(seed, lambda: torch.randn(batch, tokens, d)),)
