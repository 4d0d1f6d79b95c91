"""Row statistics and the normalize-scale-shift-activate step shared by the fused kernels.

Rows are [BLOCK_M, BLOCK_N] tiles of fp32 values whose masked-off lanes hold 0. ``norm`` is the
runtime code of ``graphopt.fused.spec.Norm``: layer norm subtracts the mean, RMS norm does not,
so both share one code path with a center that is the mean or 0.

Layer norm's statistics are taken around a pivot, the row's plain fp32 mean, by the corrected
two-pass formulas (Chan, Golub and LeVeque): d = x - pivot, mean = pivot + sum(d) / n and variance
sum(d^2) / n - (sum(d) / n)^2. The pivot is off by the rounding of a sum of the row (6e-4 on rows of
1000 + noise), which sum(d) corrects; a value near the pivot (a row with a large common offset) loses
nothing in x - pivot, which is exact there; and where x is far from the pivot, d keeps x - mean to
fp32's relative precision, as the unfused norm's x - mean does. The normalized value is
``d - sum(d) / n``, never ``x - mean``: the mean's rounding would shift every value by it. (A shift by
the row's first element, as before, rounded every difference by up to half an ulp of that element: a
row whose first element is far from the rest, 10^4 beside N(0, 1), had its other values off by
D * 2^-24 relative, 6e-5 at D = 1024, where PyTorch's layer_norm is off by 3e-7.) Rows too long for one
block take the mean of their first chunk as the pivot (see ``chunk_stats_update``).
"""

import triton
import triton.language as tl

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.ptx import widen

LAYER = tl.constexpr(0)  # graphopt.fused.spec.Norm.LAYER; RMS is 1


@triton.jit
def row_pivot(x, count, norm):
    """What layer norm's statistics are taken around: the plain fp32 mean of the tile's rows over
    ``count`` columns (masked-off lanes 0); RMS norm: 0. Each value is scaled before the sum, so rows
    near the top of the type (bf16's reaches float32's) do not overflow it."""
    return tl.where(norm == LAYER, tl.sum(x * (1.0 / count), axis=1), 0.0)


@triton.jit
def block_stats(x, mask, cols, norm, eps, EVEN: tl.constexpr):
    """(centered rows, rstd) of whole rows held in one tile (masked-off lanes 0); the variance is
    biased, as the norms define. ``EVEN``: every lane is a real column (cols == BLOCK_N), so no lane
    needs masking out of the sums (rows past the end give statistics that nothing stores).
    Masked-off lanes of the centered rows hold 0 unless EVEN."""
    # Products with one reciprocal, not a division per row (a compile-time one when EVEN): short
    # rows spend a visible share of their instructions on per-row work.
    inv_cols = 1.0 / x.shape[1] if EVEN else 1.0 / cols
    pivot = tl.where(norm == LAYER, tl.sum(x * inv_cols, axis=1), 0.0)  # (scaled first: see row_pivot)
    shifted = x - pivot[:, None] if EVEN else tl.where(mask, x - pivot[:, None], 0.0)
    # The two sums of the shifted row are independent: one reduction's latency, not two in a row.
    mean = tl.where(norm == LAYER, tl.sum(shifted, axis=1) * inv_cols, 0.0)
    variance = tl.sum(shifted * shifted, axis=1) * inv_cols - mean * mean
    centered = shifted - mean[:, None] if EVEN else tl.where(mask, shifted - mean[:, None], 0.0)
    return centered, _rstd(variance, eps)


@triton.jit
def two_tile_stats(head, tail, norm, eps):
    """``block_stats`` of whole rows held in two unmasked tiles (a head and a tail of the row, every
    lane a real column): (shifted head, shifted tail, mean, rstd), the rows less their pivot and the
    mean of what is left. The caller centers each tile where it applies it: centered earlier, the
    16-bit tiles took 2-4% longer on an H100 at 1536 and 3072 (one run, a later lease)."""
    inv_cols = 1.0 / (head.shape[1] + tail.shape[1])
    pivot = tl.where(norm == LAYER, tl.sum(head * inv_cols, axis=1) + tl.sum(tail * inv_cols, axis=1), 0.0)
    head, tail = head - pivot[:, None], tail - pivot[:, None]
    mean = tl.where(norm == LAYER, (tl.sum(head, axis=1) + tl.sum(tail, axis=1)) * inv_cols, 0.0)
    variance = (tl.sum(head * head, axis=1) + tl.sum(tail * tail, axis=1)) * inv_cols - mean * mean
    return head, tail, mean, _rstd(variance, eps)


@triton.jit
def _rstd(variance, eps):
    # Inductor passes a Python float as fp64; the statistics are fp32 throughout. The hardware
    # reciprocal square root (relative error below 2^-22, as in PyTorch's CUDA norms) replaces a
    # correctly rounded sqrt and a division.
    return tl.math.rsqrt(variance + tl.cast(eps, tl.float32))


@triton.jit
def chunk_stats_update(shifted, mask, start, cols, norm, mean, m2, BLOCK_N: tl.constexpr):
    """Folds the chunk at column ``start`` of the shifted rows (x - row_pivot of the first chunk,
    masked-off lanes 0) into their running (mean, M2) by Chan's pairwise update, which avoids the
    cancellation of sum-of-squares formulas on long rows. RMS norm keeps every mean at 0, so M2 is
    then the plain sum of squares. (The first chunk's mean is near the row's mean unless the row's
    chunks differ wildly, and then the row's spread is large beside the pivot's error.)"""
    n = tl.minimum(cols - start, BLOCK_N).to(tl.float32)
    chunk_mean = tl.where(norm == LAYER, tl.sum(shifted, axis=1) / n, 0.0)
    centered = tl.where(mask, shifted - chunk_mean[:, None], 0.0)
    count = start * 1.0  # every earlier chunk was full
    total = count + n
    delta = chunk_mean - mean
    mean = mean + delta * (n / total)
    m2 = m2 + tl.sum(centered * centered, axis=1) + delta * delta * (count * n / total)
    return mean, m2


@triton.jit
def finish_stats(m2, cols, eps):
    return _rstd(m2 / cols, eps)


@triton.jit
def load_affine(W, B, idx, col_ok, has_scale, has_bias):
    """Scale and bias of the columns ``idx`` as fp32 (1 and 0 where absent), loaded once per
    program so that a program handling several row blocks reuses them from registers.

    Absent ones are masked loads that read nothing, not branches: the ahead-of-time variants take
    ``has_scale`` and ``has_bias`` at run time (the JIT folds them when they are 1), and a branch
    around a whole row's scale and bias costs long rows up to 1.4x their memory time there."""
    scale = widen(tl.load(W + idx, mask=masked_by(col_ok, has_scale), other=1.0))
    bias = widen(tl.load(B + idx, mask=masked_by(col_ok, has_bias), other=0.0))
    return scale, bias


@triton.jit
def masked_by(mask, flag):
    """``mask`` where the runtime integer ``flag`` is set, else all false (as a tensor: the
    interpreter takes no Python bool in a mask)."""
    return mask & ((tl.zeros(mask.shape, tl.int32) + flag) != 0)


@triton.jit
def center(x, shift, mean):
    """x minus the row's mean, from the pivot and the shifted row's mean (see the module's doc)."""
    return (x - shift[:, None]) - mean[:, None]


@triton.jit
def normalize_activate(centered, rstd, scale, bias, activation, storage: tl.constexpr):
    """act(centered * rstd * scale + bias) in fp32 (scale 1 and bias 0 where absent), for a
    result stored as ``storage``."""
    y = centered * rstd[:, None] * scale[None, :] + bias[None, :]
    return apply_activation(y, activation, storage)
