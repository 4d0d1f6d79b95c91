"""The exact division of run offsets by the spatial size that GroupNormAct's kernels use to find an
element's channel (a multiply-high and a shift), under Triton's interpreter, against integer
division: every divisor class (1, powers of two, their neighbours, odd, the largest int32) and
numerators up to 2^31 - 1."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
from kernel_checks import device

from graphopt.fused.group_norm_act.kernel_parts import channel_of, spatial_divider

N = 64


@triton.jit
def _divide(Q, numerators, spatial, N: tl.constexpr):
    offs = tl.arange(0, N)
    magic, shift = spatial_divider(spatial)
    tl.store(Q + offs, channel_of(tl.load(numerators + offs), spatial, magic, shift))


def numerators(spatial: int) -> np.ndarray:
    top = 2**31 - 1
    around = [k * spatial + delta for k in (1, 2, 7, top // spatial) for delta in (-1, 0, 1)]
    picks = [0, 1, spatial - 1, top, top - 1, *around, *np.random.default_rng(spatial).integers(0, top, 20)]
    picks = [p for p in picks if 0 <= p <= top]
    return np.array((picks * N)[:N], dtype=np.int32)


@pytest.mark.parametrize(
    "spatial", [1, 2, 3, 5, 7, 15, 16, 17, 255, 256, 257, 4096, 4097, 65535, 65536, 2**30 + 1, 2**31 - 1]
)
def test_channel_of_is_integer_division(spatial):
    n = numerators(spatial)
    q = torch.empty(N, dtype=torch.int32, device=device())
    _divide[(1,)](q, torch.from_numpy(n).to(device()), spatial, N=N)
    np.testing.assert_array_equal(q.cpu().numpy(), n // spatial)


@triton.jit
def _divide_by_constant(Q, numerators, SPATIAL: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    magic, shift = spatial_divider(SPATIAL)
    tl.store(Q + offs, channel_of(tl.load(numerators + offs), SPATIAL, magic, shift))


@pytest.mark.parametrize("spatial", [1, 3, 4096])
def test_a_spatial_size_known_at_compile_time(spatial):
    # Triton's JIT passes an integer argument of 1 as a constant, not as a tensor.
    n = numerators(spatial)
    q = torch.empty(N, dtype=torch.int32, device=device())
    _divide_by_constant[(1,)](q, torch.from_numpy(n).to(device()), SPATIAL=spatial, N=N)
    np.testing.assert_array_equal(q.cpu().numpy(), n // spatial)
