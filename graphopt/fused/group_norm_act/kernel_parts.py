"""The pieces of GroupNormAct's Triton kernels that the one-program-per-run kernel
(``triton_kernel.py``) and the split kernels (``split_kernels.py``) share: reading a block of the
run (with the residual added and rounded as the unfused graph stores it), the shift the statistics
are taken around, folding a block into running statistics, and the per-channel affine step and
activation of a normalized block.

Every run is the contiguous ``group_size`` elements of one (sample, group) starting at ``base``;
offsets below are relative to the tensors' starts (``load_sum``) or to ``base`` (``finish_block``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.ptx import widen
from graphopt.kernels.row_norm import masked_by


@triton.jit
def load_sum(X, R, S, offs, mask, has_residual, write_sum):
    """A block of X (+ R, added in fp32 and rounded once to the storage type) as fp32; with
    ``write_sum`` the rounded sum is stored to S."""
    x = tl.load(X + offs, mask=mask, other=0.0)
    if has_residual:
        r = tl.load(R + offs, mask=mask, other=0.0)
        x = (widen(x) + widen(r)).to(x.dtype)
        if write_sum:
            tl.store(S + offs, x, mask=mask)
    return widen(x)


@triton.jit
def first_of_run(X, R, base, has_residual):
    """The run's first element (of X + R, rounded as ``load_sum`` rounds it) as fp32: the shift the
    statistics are taken around (differences of nearby floats are exact, so a large common offset
    costs no precision; see graphopt/kernels/row_norm.py)."""
    x = tl.load(X + base)
    if has_residual:
        x = (x.to(tl.float32) + tl.load(R + base).to(tl.float32)).to(x.dtype)
    return x.to(tl.float32)


@triton.jit
def chan_update(shifted, start, length, mean, m2, BLOCK_N: tl.constexpr):
    """Folds the block at ``start`` of a stretch of ``length`` shifted elements (masked-off lanes 0)
    into the stretch's running (mean, M2) by Chan's pairwise update, which avoids the cancellation
    of sum-of-squares formulas on long runs. Every earlier block was full."""
    n = tl.minimum(length - start, BLOCK_N).to(tl.float32)
    block_mean = tl.sum(shifted, axis=0) / n
    offs = tl.arange(0, BLOCK_N)
    centered = tl.where(start + offs < length, shifted - block_mean, 0.0)
    count = start * 1.0
    total = count + n
    delta = block_mean - mean
    mean = mean + delta * (n / total)
    m2 = m2 + tl.sum(centered * centered, axis=0) + delta * delta * (count * n / total)
    return mean, m2


@triton.jit
def spatial_divider(spatial):
    """(magic, shift) that divide a run offset n < 2^31 by ``spatial`` >= 2 exactly as
    ``umulhi(n, magic) >> shift``: two instructions per element where a division by a run-time int
    takes about twenty, a third of the normalize step's instructions on 16-bit data.

    With l = ceil(log2(spatial)) and magic = ceil(2^(31 + l) / spatial) (below 2^32), magic *
    spatial = 2^(31 + l) + e with 0 <= e < spatial <= 2^l, so n * magic / 2^(31 + l) exceeds
    n / spatial by less than 1 / spatial, and its floor is n // spatial."""
    d = tl.full((), 0, tl.int64) + spatial  # (Triton's JIT passes a spatial of 1 as a constant)
    # floor(log2(d)) from the exponent of d as a double (exact: d < 2^53)
    floor_log2 = ((d.to(tl.float64).to(tl.int64, bitcast=True) >> 52) & 2047) - 1023
    ceil_log2 = floor_log2 + ((d & (d - 1)) != 0).to(tl.int64)
    magic = ((tl.full((), 1, tl.int64) << (31 + ceil_log2)) + d - 1) // d
    return magic.to(tl.uint32), tl.maximum(ceil_log2 - 1, 0).to(tl.uint32)


@triton.jit
def channel_of(idx, spatial, magic, shift):
    """idx // spatial for run offsets ``idx`` (``spatial_divider`` gives magic and shift)."""
    quotient = (tl.umulhi(idx.to(tl.uint32), magic) >> shift).to(tl.int32)
    return tl.where(spatial == 1, idx, quotient)


@triton.jit
def finish_block(
    centered, rstd, idx, mask, channel0, spatial, magic, shift, W, B, Y, base, activation, has_scale, has_bias
):
    """Scales and shifts the normalized block (``centered * rstd``) at run offsets ``idx`` by their
    channels' Scale and Bias, activates it and stores it to Y."""
    channel = channel0 + channel_of(idx, spatial, magic, shift)
    scale = widen(tl.load(W + channel, mask=masked_by(mask, has_scale), other=1.0))
    bias = widen(tl.load(B + channel, mask=masked_by(mask, has_bias), other=0.0))
    y = apply_activation(centered * rstd * scale + bias, activation, Y.dtype.element_ty)
    tl.store(Y + base + idx, y.to(Y.dtype.element_ty), mask=mask)
