"""GroupNormAct's split kernels: statistics over (sample, group, chunk), then normalization over the same.

Where N * groups runs are too few to fill the GPU (launch_rule.py), each run is cut into chunks and
two kernels run one program per chunk:

1. ``group_norm_stats_kernel`` reads its chunk (X, + Residual rounded to the storage type and, when
   asked, stored as ResidualSum) and writes the chunk's partial statistics to a float32 scratch
   buffer P: its pivot (the plain mean of its first block), the mean of its elements minus the pivot
   and their M2 (sum of squared deviations from that mean, by Chan's update block by block), as the
   whole kernel takes a run's (graphopt/kernels/row_norm.py: a large common offset costs no
   precision, nor does an element far from the rest). The chunk's count follows from the shape.
2. ``group_norm_apply_kernel`` loads its run's partials and merges them around the first chunk's
   pivot: each chunk's mean relative to it is (pivot_i - pivot_0) + mean_i, the first term exact
   (pivots of one run are nearby floats), then Chan's parallel formula (mean = sum(n_i mean_i) / n,
   M2 = sum(M2_i) + sum(n_i (mean_i - mean)^2), every term non-negative). It normalizes, scales,
   shifts and activates its chunk: from ResidualSum where the statistics kernel stored it (one
   tensor read, not two), else from X (+ Residual, rounded again alike). Compiled twice: with
   ``TWO_CHANNEL`` for launches whose channels each hold a whole block (launch_rule.long_channels),
   which scale and shift by each channel's scalars, where the other looks both up per element.

X is read twice. The second read comes from L2 where what the statistics kernel read still fits
there (50 MB on an H100); past that it comes from HBM, and the launch moves 3/2 of a copy's bytes
without a residual, 5/4 with one and its sum stored. The apply kernel walks the chunks in the
reverse of the statistics kernel's order, so that it starts on what the statistics kernel read
last, the part most likely still in L2.

This module imports neither torch nor a GPU driver (the ahead-of-time build imports it).
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.fused.group_norm_act.kernel_parts import (
    chan_update,
    finish_run_block,
    load_sum,
    spatial_divider,
)
from graphopt.kernels.ptx import widen


@triton.jit
def chunk_of(pid, chunks, chunk, group_size):
    """(run start, chunk start within the run, chunk length, row) of program ``pid``."""
    row = pid // chunks
    begin = (pid % chunks) * chunk
    return row.to(tl.int64) * group_size, begin, tl.minimum(chunk, group_size - begin), row


@triton.jit
def group_norm_stats_kernel(
    X, R, S, P,
    group_size, chunk, chunks,
    has_residual, write_sum,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # row * chunks + chunk
    base, begin, length, _ = chunk_of(pid, chunks, chunk, group_size)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < length
    x = load_sum(X, R, S, base + begin + offs, mask, has_residual, write_sum)
    # The pivot: the plain mean of the first block, each value scaled before the sum (no overflow).
    pivot = tl.sum(x * (1.0 / tl.minimum(length, BLOCK_N).to(tl.float32)), axis=0)
    zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
    mean, m2 = chan_update(tl.where(mask, x - pivot, 0.0), 0, length, zero, zero, BLOCK_N)
    for start in range(BLOCK_N, length, BLOCK_N):
        mask = start + offs < length
        x = load_sum(X, R, S, base + begin + start + offs, mask, has_residual, write_sum)
        mean, m2 = chan_update(tl.where(mask, x - pivot, 0.0), start, length, mean, m2, BLOCK_N)
    tl.store(P + 3 * pid, pivot)
    tl.store(P + 3 * pid + 1, mean)
    tl.store(P + 3 * pid + 2, m2)


@triton.jit
def merged_statistics(P, first, chunks, chunk, group_size, eps, BLOCK_C: tl.constexpr, CACHE: tl.constexpr):
    """(pivot, mean - pivot, rstd) of a run from its ``chunks`` partials at P[3 * first:], around
    the first chunk's pivot. ``CACHE``: the loads' cache modifier ("" the default; ".cg" reads past
    L1, as a kernel must that reads partials other programs write during its own launch). (Passed,
    not defaulted: Triton 3.6 takes no default for a string constant.)"""
    j = tl.arange(0, BLOCK_C)
    valid = j < chunks
    pivot = tl.load(P + 3 * first, cache_modifier=CACHE)
    pivots = tl.load(P + 3 * (first + j), mask=valid, other=0.0, cache_modifier=CACHE)
    chunk_means = tl.load(P + 3 * (first + j) + 1, mask=valid, other=0.0, cache_modifier=CACHE)
    means = tl.where(valid, (pivots - pivot) + chunk_means, 0.0)
    m2s = tl.load(P + 3 * (first + j) + 2, mask=valid, other=0.0, cache_modifier=CACHE)
    counts = tl.where(valid, tl.minimum(chunk, group_size - j * chunk), 0).to(tl.float32)
    n = group_size * 1.0
    mean = tl.sum(counts * means, axis=0) / n
    spread = tl.where(valid, means - mean, 0.0)
    m2 = tl.sum(m2s, axis=0) + tl.sum(counts * spread * spread, axis=0)
    # (Inductor passes a Python float as fp64; the statistics are fp32 throughout.)
    return pivot, mean, tl.math.rsqrt(m2 / n + tl.cast(eps, tl.float32))


@triton.jit
def group_norm_apply_kernel(
    X, R, W, B, Y, S, P,
    groups, group_size, spatial, chunk, chunks,
    eps, activation, has_scale, has_bias, has_residual, read_sum,
    BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr, TWO_CHANNEL: tl.constexpr,
):  # fmt: skip
    pid = tl.num_programs(0) - 1 - tl.program_id(0)  # the statistics kernel's order, reversed
    base, begin, length, row = chunk_of(pid, chunks, chunk, group_size)
    shift, mean, rstd = merged_statistics(P, row * chunks, chunks, chunk, group_size, eps, BLOCK_C, "")
    channels = group_size // spatial  # in the group
    channel0 = (row % groups) * channels
    magic, shift_bits = spatial_divider(spatial)
    _normalize_chunk(
        X, R, W, B, Y, S, base, begin, length, shift, mean, rstd, channel0, channels, spatial, magic,
        shift_bits, activation, has_scale, has_bias, has_residual, read_sum, BLOCK_N, TWO_CHANNEL,
    )  # fmt: skip


@triton.jit
def _normalize_chunk(
    X, R, W, B, Y, S, base, begin, length, shift, mean, rstd, channel0, channels, spatial, magic, shift_bits,
    activation, has_scale, has_bias, has_residual, read_sum, BLOCK_N: tl.constexpr, TWO_CHANNEL: tl.constexpr,
):  # fmt: skip
    """Normalizes, scales, shifts and activates the chunk of ``length`` elements at run offset
    ``begin``, block by block."""
    offs = tl.arange(0, BLOCK_N)
    for start in range(0, length, BLOCK_N):
        idx = begin + start + offs
        mask = start + offs < length
        if read_sum:
            x = widen(tl.load(S + base + idx, mask=mask, other=0.0))
        else:
            x = load_sum(X, R, S, base + idx, mask, has_residual, 0)
        finish_run_block(
            (x - shift) - mean, rstd, begin + start, offs, mask, channel0, channels, spatial, magic,
            shift_bits, W, B, Y, base, activation, has_scale, has_bias, BLOCK_N, TWO_CHANNEL,
        )  # fmt: skip
