"""The seed model: split a flat feature vector into N slices, LayerNorm → tanh each, stack, Linear, ReLU.

`SplitStack` is written the way the seed writes it (one chain per slice); `Combined` is the hand-written
horizontally fused equivalent (one 3-D LayerNorm, no split or stack). Both hold the same Linear weights
for a given seed, so their outputs agree to rounding.
"""

from __future__ import annotations

import torch
from torch import nn

from models.seeding import randn, seeded

DEFAULT_N, DEFAULT_B, DEFAULT_D = 16, 1024, 256
WEIGHT_SEED = 0
INPUT_SEED = 1


def _seeded_linear(in_features: int, seed: int) -> nn.Linear:
    return seeded(seed, lambda: nn.Linear(in_features, 1))


class SplitStack(nn.Module):
    """`split_stack(input_data, batch_size, input_dim)` from the seed, as a module."""

    def __init__(self, n: int = DEFAULT_N, b: int = DEFAULT_B, d: int = DEFAULT_D, seed: int = WEIGHT_SEED):
        super().__init__()
        self.n, self.b, self.d = n, b, d
        self.layer_norm = nn.LayerNorm(d, eps=0.0, elementwise_affine=False)
        self.linear = _seeded_linear(d, seed)

    def forward(self, input_data: torch.Tensor) -> torch.Tensor:
        split_input_data = torch.split(input_data, self.d * self.b)
        norm_features = []
        for features in split_input_data:
            features_view = features.view([self.b, self.d])
            norm_features_view = self.layer_norm(features_view)
            norm_features.append(torch.tanh(norm_features_view))
        linear_input = torch.stack(norm_features)
        return nn.functional.relu(self.linear(linear_input))


class Combined(nn.Module):
    """`combined(input_data, num_inputs, batch_size, input_dim)` from the seed: one 3-D view."""

    def __init__(self, n: int = DEFAULT_N, b: int = DEFAULT_B, d: int = DEFAULT_D, seed: int = WEIGHT_SEED):
        super().__init__()
        self.n, self.b, self.d = n, b, d
        self.layer_norm = nn.LayerNorm(d, eps=0.0, elementwise_affine=False)
        self.linear = _seeded_linear(d, seed)

    def forward(self, input_data: torch.Tensor) -> torch.Tensor:
        features3d = input_data.view(self.n, self.b, self.d)
        tanh_norm_features = torch.tanh(self.layer_norm(features3d))
        return nn.functional.relu(self.linear(tanh_norm_features))


def example_input(
    n: int = DEFAULT_N, b: int = DEFAULT_B, d: int = DEFAULT_D, seed: int = INPUT_SEED, dtype=torch.float32
) -> torch.Tensor:
    """The flat input of length N*B*D, standard normal, reproducible."""
    return randn(n * b * d, seed=seed, dtype=dtype)


def example_inputs(n: int = DEFAULT_N, b: int = DEFAULT_B, d: int = DEFAULT_D, seed: int = INPUT_SEED):
    """Positional inputs for `model(*example_inputs(...))` and for the exporters."""
    return (example_input(n, b, d, seed),)
