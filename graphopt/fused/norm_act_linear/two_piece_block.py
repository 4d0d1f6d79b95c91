"""NormActLinear on a block of rows of exactly HEAD_N + TAIL_N columns (both powers of two: 768 =
512 + 256, 1280 = 1024 + 256), read as two unmasked tiles, scale, bias, weight and linear bias shared
by all rows (the tiers are ``shared``): no lane holds padding, where one block of the next power of
two leaves a quarter (768) or three eighths (640, 1280) of its lanes computing nothing (NormAct's
head-and-tail path: both read the rows with ``graphopt.fused.norm_act.triton_kernel.two_tiles``)."""

import triton
import triton.language as tl

from graphopt.fused.norm_act.triton_kernel import two_tiles
from graphopt.kernels.activations import apply_activation
from graphopt.kernels.row_norm import load_affine, normalize_activate


@triton.jit
def _dot(h, WL, k, idx, cols):
    """Each row's dot product of the tile ``h`` (columns ``idx``) with row k of the weight."""
    return tl.sum(h * tl.load(WL + k * cols + idx).to(tl.float32)[None, :], axis=1)


@triton.jit
def two_piece_rows(
    X, R, W, B, WL, LB, Y, S, row, row_ok, r_base, stride_x, out_features, eps, norm, activation,
    out_activation, has_scale, has_bias, has_linear_bias, has_residual, write_sum,
    HEAD_N: tl.constexpr, TAIL_N: tl.constexpr,
):  # fmt: skip
    cols: tl.constexpr = HEAD_N + TAIL_N
    head, tail = tl.arange(0, HEAD_N), HEAD_N + tl.arange(0, TAIL_N)
    xh, xt, mean, rstd, _, _, _ = two_tiles(
        X, R, S, row, row_ok, r_base, stride_x, eps, norm, has_residual, write_sum, HEAD_N, TAIL_N
    )
    storage = Y.dtype.element_ty
    scale, bias = load_affine(W, B, head, head < cols, has_scale, has_bias)
    hh = normalize_activate(xh - mean[:, None], rstd, scale, bias, activation, storage)
    scale, bias = load_affine(W, B, tail, tail < cols, has_scale, has_bias)
    ht = normalize_activate(xt - mean[:, None], rstd, scale, bias, activation, storage)
    y_row = row * out_features
    for k in range(0, out_features):
        acc = _dot(hh, WL, k, head, cols) + _dot(ht, WL, k, tail, cols)
        if has_linear_bias:
            acc = acc + tl.load(LB + k).to(tl.float32)
        acc = apply_activation(acc, out_activation, storage)
        tl.store(Y + y_row + k, acc.to(storage), mask=row_ok)
