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


@triton.jit
def _channel_scalar(P, channel, present, other):
    """P[channel] as fp32 where ``present`` (a runtime flag or condition), else ``other``."""
    value = tl.full((), other, tl.float32)
    if present:
        value = tl.load(P + channel).to(tl.float32)
    return value


@triton.jit
def finish_two_channel_block(
    centered, rstd, start, offs, mask, channel0, channels, spatial, W, B, Y, base, activation, has_scale,
    has_bias, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """``finish_block`` for the block at run offsets ``start + offs`` where a channel holds at least
    BLOCK_N elements (``spatial >= BLOCK_N``), so that the block spans at most two channels: each
    one's Scale and Bias are loaded once and folded with rstd into a multiplier and an addend, where
    ``finish_block`` divides every offset by ``spatial`` and gathers Scale and Bias per element. On
    16-bit data, whose blocks are instruction-bound, that is most of the normalize step's work."""
    first = start // spatial  # the block's first channel, within the group
    boundary = (first + 1) * spatial - start  # offsets below it are in that channel
    second = (boundary < BLOCK_N) & (first + 1 < channels)  # the block reaches the next channel
    channel = channel0 + first
    a0 = _channel_scalar(W, channel, has_scale, 1.0) * rstd
    b0 = _channel_scalar(B, channel, has_bias, 0.0)
    a1 = _channel_scalar(W, channel + 1, (has_scale != 0) & second, 1.0) * rstd
    b1 = _channel_scalar(B, channel + 1, (has_bias != 0) & second, 0.0)
    in_first = offs < boundary
    y = centered * tl.where(in_first, a0, a1) + tl.where(in_first, b0, b1)
    y = apply_activation(y, activation, Y.dtype.element_ty)
    tl.store(Y + base + start + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def finish_run_block(
    centered, rstd, start, offs, mask, channel0, channels, spatial, magic, shift, W, B, Y, base, activation,
    has_scale, has_bias, BLOCK_N: tl.constexpr, TWO_CHANNEL: tl.constexpr,
):  # fmt: skip
    """Scales, shifts, activates and stores the normalized block at run offsets ``start + offs``
    (``centered``: the block minus the run's mean): with ``TWO_CHANNEL`` (for launches where
    ``spatial >= BLOCK_N``: the common diffusion shapes, spatial 4096 and more) by channel-wide
    scalars, else per element. A constant of the compiled variant, not a run-time test: a branch per
    block kept both paths' registers live (224 instead of 126 a thread in the 16-bit apply kernel)."""
    if TWO_CHANNEL:
        finish_two_channel_block(
            centered, rstd, start, offs, mask, channel0, channels, spatial, W, B, Y, base, activation,
            has_scale, has_bias, BLOCK_N,
        )  # fmt: skip
    else:
        finish_block(
            centered, rstd, start + offs, mask, channel0, spatial, magic, shift, W, B, Y, base, activation,
            has_scale, has_bias,
        )  # fmt: skip
