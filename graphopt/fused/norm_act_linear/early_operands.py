"""NormActLinear's operands loaded in flight with a block's rows.

The kernel otherwise loads scale and bias after the row's statistics and each output's weight row
after the output before it: on short rows, whose programs are short, those waits add up to more than
the row's own load. Where one row of each operand serves the whole block, the kernel issues them
before the row's load instead (the caller loads scale and bias; these helpers the weights and the
outputs they serve).
"""

import triton
import triton.language as tl

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.row_norm import masked_by

# Per-feature operands in fp32, blockwise (one operand row per block), on rows up to this long load
# their operands with the row (below); other launches load them after the row's statistics.
# (bench/probe_norm_act_linear_early.py and the widths/forms/C++ benches, H100, 2026-11-27: per-feature
# fp32 rows took up to 12% less time, none longer. Loaded early for shared operands too, the seed's
# K = 1 launch took 8% longer from C++ with a CUDA graph; for 16-bit per-feature operands, K = 4
# launches took 2-5% longer through PyTorch.)
EARLY_OPERAND_COLS = tl.constexpr(256)
# Weight rows loaded with the row where K is at least this; narrower K loads the first only.
EARLY_OUTPUTS = tl.constexpr(4)


@triton.jit
def early_weights(WL, idx, col_ok, cols, out_features):
    """(the first EARLY_OUTPUTS rows of the block's weight matrix WL where K >= EARLY_OUTPUTS, else
    nothing; its first row where K is narrower, else nothing): loads issued before the row's, so their
    latency hides behind it. The one not taken reads no memory (predicated off)."""
    kk = tl.arange(0, EARLY_OUTPUTS)
    # (the outputs each load serves, as limits: 0 where the other load is the one taken)
    tile_k = tl.where(out_features >= EARLY_OUTPUTS, out_features, 0)
    first_k = tl.where(out_features < EARLY_OUTPUTS, out_features, 0)
    w_tile = tl.load(
        WL + kk[:, None] * cols + idx[None, :], mask=(kk < tile_k)[:, None] & col_ok[None, :], other=0.0
    )
    # (idx * 0 < first_k: the condition as a tensor, since the interpreter takes no scalar in a mask)
    w_first = tl.load(WL + idx, mask=col_ok & (idx * 0 < first_k), other=0.0)
    return w_tile, w_first


@triton.jit
def early_outputs(h, w_tile, w_first, LB, has_linear_bias, out_activation, Y, y_row, row_ok, out_features):
    """Writes the outputs whose weights ``early_weights`` loaded (EARLY_OUTPUTS of them, or the first)
    and returns the first output left to the per-output loop."""
    ty = Y.dtype.element_ty
    if out_features >= EARLY_OUTPUTS:
        kk = tl.arange(0, EARLY_OUTPUTS)
        tile_y = tl.sum(h[:, None, :] * w_tile.to(tl.float32)[None, :, :], axis=2)
        # (every lane of the tile is an output here: K >= EARLY_OUTPUTS)
        tile_lb = tl.load(LB + kk, mask=masked_by(kk < EARLY_OUTPUTS, has_linear_bias), other=0.0)
        tile_y = apply_activation(tile_y + tile_lb.to(tl.float32)[None, :], out_activation, ty)
        tl.store(Y + y_row[:, None] + kk[None, :], tile_y.to(ty), mask=row_ok[:, None])
        k_start = EARLY_OUTPUTS
    else:
        first_y = tl.sum(h * w_first.to(tl.float32)[None, :], axis=1)
        if (has_linear_bias != 0) & (out_features > 0):
            first_y = first_y + tl.load(LB).to(tl.float32)
        first_y = apply_activation(first_y, out_activation, ty)
        tl.store(Y + y_row, first_y.to(ty), mask=row_ok & (y_row * 0 < out_features))
        k_start = 1
    return k_start
