"""The AffineAct Triton kernel: Y = act(X * Scale + Bias), pointwise, one channel per row or column.

X is seen as a contiguous [rows, cols] matrix. With the channel axis last (a linear layer's bias),
the channel of an element is its column: ``cols`` is the channel count. Otherwise (a batch norm over
NCHW) the dims after the channel axis are the columns and the channel of a row is ``row % channels``:
one scale and bias per row, loaded once per row of the tile. Either way each program covers a 2-D tile
of about ``TILE`` elements, its columns contiguous so loads and stores vectorize, and reads each
scale and bias once per tile. Arithmetic is float32; Y takes X's dtype.
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.activations import GELU, RELU, apply_activation
from graphopt.kernels.ptx import widen

# Elements per program: 16 per thread at 4 warps for 32-bit storage, twice that for 16-bit (each
# thread then moves four 16-byte vectors either way).
TILE = {4: 2048, 2: 4096}
NUM_WARPS = 4
# Past this, x * Phi(x) of the GELU kernels' polynomial (fitted on |x| <= 6) is no longer tiny
# enough: a large negative input must give -0 (its true value is below 1e-22 in size), not
# x * Phi(-6).
GELU_ZERO_BELOW = tl.constexpr(-10.0)


@triton.jit
def affine_act_kernel(
    X, S, B, Y, rows, cols, channels, activation,
    HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, PER_ROW: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    col = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = row < rows
    col_ok = col < cols
    mask = row_ok[:, None] & col_ok[None, :]
    offset = row[:, None] * cols + col[None, :]
    z = widen(tl.load(X + offset, mask=mask, other=0.0))
    if PER_ROW:
        channel = row % channels
        if HAS_SCALE:
            z = z * widen(tl.load(S + channel, mask=row_ok, other=1.0))[:, None]
        if HAS_BIAS:
            z = z + widen(tl.load(B + channel, mask=row_ok, other=0.0))[:, None]
    else:
        if HAS_SCALE:
            z = z * widen(tl.load(S + col, mask=col_ok, other=1.0))[None, :]
        if HAS_BIAS:
            z = z + widen(tl.load(B + col, mask=col_ok, other=0.0))[None, :]
    if activation == RELU:
        y = tl.where(z < 0.0, 0.0, z)  # (NaN stays NaN, as torch.relu and ONNX Relu give; maximum drops it)
    else:
        y = apply_activation(z, activation, Y.dtype.element_ty)
    if activation == GELU:
        y = tl.where(z < GELU_ZERO_BELOW, z * 0.0, y)  # (-0; and NaN for -inf, as x * Phi(x) gives)
    tl.store(Y + offset, y.to(Y.dtype.element_ty), mask=mask)


def tile_shape(cols: int, element_bytes: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): the whole row where it fits in a tile, else tile-wide column blocks."""
    tile = TILE[element_bytes]
    block_n = min(triton.next_power_of_2(max(cols, 1)), tile)
    return tile // block_n, block_n


def launch_affine_act(
    x2d, scale, bias, y2d, *, channels: int, per_row: bool, activation: int, wrap=lambda kernel: kernel
) -> None:
    """Launches AffineAct on contiguous [rows, cols] torch tensors ``x2d`` and ``y2d``; ``scale`` and
    ``bias`` are contiguous [channels] or None. ``wrap`` may be ``torch.library.wrap_triton``."""
    rows, cols = x2d.shape
    if rows == 0 or cols == 0:
        return
    block_m, block_n = tile_shape(cols, x2d.element_size())
    grid = (triton.cdiv(rows, block_m), triton.cdiv(cols, block_n))
    wrap(affine_act_kernel)[grid](
        x2d, scale if scale is not None else x2d, bias if bias is not None else x2d, y2d,
        rows, cols, channels, int(activation),
        HAS_SCALE=scale is not None, HAS_BIAS=bias is not None, PER_ROW=per_row,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=NUM_WARPS,
    )  # fmt: skip
