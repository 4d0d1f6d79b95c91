"""A candidate NormAct for rows that are not a power of two, timed by ``bench_widths.py --candidates``
(``chunked_*``): tried on an H200, not adopted (bench/results/README.md, seventh session).

Triton's blocks are powers of two long, so a row of 768 columns (3 x 256) sits in a block of 1024 whose
padding lanes compute like real ones, and 16-bit NormAct is bound by instruction issue. Here a row of
CHUNKS x P columns is CHUNKS chunks of P columns and a program's tile is [TILE, P], TILE the next
power of two above BLOCK_M * CHUNKS: chunk c of the tile is chunk ``c % CHUNKS`` of the program's row
``c // CHUNKS`` (15 of 16 chunk rows hold data for 5 rows of 3 chunks or 3 rows of 5). A row's sums
are its chunks' sums added within its segment of the tile, through a [TILE, TILE] select; the
statistics are ``row_norm.block_stats``'s term for term (LayerNorm, shared scale and bias, no residual).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.runtime.jit import constexpr_function

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.ptx import widen
from graphopt.kernels.row_norm import _rstd


@constexpr_function
def _tile_chunks(block_m, chunks):
    return triton.next_power_of_2(int(block_m) * int(chunks))


@triton.jit
def _segment_sum(partial, segment):
    """Each chunk's row total of ``partial`` (one value per chunk row), ``segment`` each chunk's row."""
    same = segment[:, None] == segment[None, :]
    return tl.sum(tl.where(same, partial[None, :], 0.0), axis=1)


@triton.jit
def chunked_norm_act_kernel(
    X, W, B, Y, rows, eps, activation,
    BLOCK_M: tl.constexpr, P: tl.constexpr, CHUNKS: tl.constexpr,
):  # fmt: skip
    cols: tl.constexpr = CHUNKS * P
    chunk = tl.arange(0, _tile_chunks(BLOCK_M, CHUNKS))
    local = chunk // CHUNKS
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + local
    ok = (local < BLOCK_M) & (row < rows)
    offs = tl.arange(0, P)
    mask = ok[:, None] & (offs < P)[None, :]
    col = ((chunk % CHUNKS) * P)[:, None] + offs[None, :]  # the chunk's columns of its row
    x = widen(tl.load(X + row[:, None] * cols + col, mask=mask, other=0.0))
    inv_cols = 1.0 / cols
    pivot = _segment_sum(tl.sum(x * inv_cols, axis=1), local)
    shifted = x - pivot[:, None]
    mean = _segment_sum(tl.sum(shifted, axis=1), local) * inv_cols
    variance = _segment_sum(tl.sum(shifted * shifted, axis=1), local) * inv_cols - mean * mean
    rstd = _rstd(variance, eps)
    scale, bias = widen(tl.load(W + col)), widen(tl.load(B + col))  # (each chunk row its chunk, from L1)
    storage = Y.dtype.element_ty
    y = apply_activation((shifted - mean[:, None]) * rstd[:, None] * scale + bias, activation, storage)
    tl.store(Y + row[:, None] * cols + col, y.to(storage), mask=mask)
