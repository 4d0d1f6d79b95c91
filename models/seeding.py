"""Deterministic weights: build a module under a fixed seed without disturbing the caller's RNG state."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def seeded(seed: int, make: Callable[[], T]) -> T:
    """Call `make()` with torch's CPU generator seeded, restoring the global RNG state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A reproducible standard-normal tensor."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)
