"""NormActLinear: Y = out_act(act(norm(X [+ R]) * scale + bias) @ Weight^T + linear_bias), and
ResidualSum = X + R when R is given.

A norm and activation over the last dimension D followed by a narrow linear layer (Weight is
[K, D], K small, or one [K, D] matrix per slice of X's rows): each row of X is read once, its
normalized and activated values never leave the chip, and only K numbers per row are written
(plus the residual sum where one is asked for). Storage fp32/fp16/bf16, all math and the dot
products in fp32, Y [rows, K] contiguous in X's dtype. X and R rows may be strided.

Scale, bias, residual, weight and linear bias may broadcast over X's rows (per-feature norms and
linear layers after horizontal batching, a position embedding as the residual): row r reads the
operand's row, or matrix, ``(r // inner) % groups`` (``graphopt.fused.broadcast_rows``). Shared
ones take uniform branches that run the one-row code.
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.fused.norm_act.triton_kernel import (
    dtype_name,
    load_sum,
    normalize_rows,
    operand_row,
    operand_rows,
)
from graphopt.fused.norm_act_linear.tiers import norm_act_linear_config, norm_act_linear_tiers
from graphopt.fused.norm_act_linear.two_piece_block import two_piece_rows
from graphopt.kernels.activations import apply_activation
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import (
    is_aligned,
    uniform_rows,
    unwritten_output,
)
from graphopt.kernels.row_norm import (
    block_stats,
    center,
    chunk_stats_update,
    finish_stats,
    load_affine,
    normalize_activate,
    row_pivot,
)

# Output columns accumulated together on the looped path (rows longer than one block).
LOOP_BLOCK_K = tl.constexpr(16)
# Per-feature operands in fp32, blockwise (one operand row per block), on rows up to this long: scale
# and bias are loaded in flight with the row, not after its statistics. On an H100, at the per-feature
# model's launch (N = 128 features of 512 rows, D = 256; bench/results/2026-11-28-h100/early_variants
# .json) that takes 28.5 µs instead of 33.9 at K = 1 and 35.1 instead of 38.4 at K = 4 as the
# ahead-of-time kernel runs it (27.4 and 33.5 instead of 31.5 and 36.7 through the JIT). Loading the
# first output's weight row early too needed 101 registers a thread instead of 87 in the ahead-of-time
# kernel, which takes K at run time, and took 29.2 and 36.5 µs there (the JIT, which folds K = 1, 26.8
# at K = 1). Loaded early for shared operands, the seed's K = 1 launch took 8% longer from C++ with a
# CUDA graph, and for 16-bit per-feature operands K = 4 launches 2-5% longer through PyTorch
# (bench/results/2026-11-27-h100e).
EARLY_OPERAND_COLS = tl.constexpr(256)


@triton.jit
def _block_group(first, last, inner, groups, size, BLOCKWISE: tl.constexpr = False):
    """The offset of the operand row (or matrix) of ``size`` elements that the block's first row
    reads, and whether every row of the block, ``first`` to ``last``, reads that one: then one
    vector load serves the block, as for a shared operand (per-feature operands on blocks inside one
    feature, the usual case), else each row loads its own. (A uniform branch: a shared operand
    costs no division.) ``BLOCKWISE``: the launcher knows every block lies inside one group, so
    ``same`` is the constant true and the per-row code behind it is folded away."""
    offset = first * 0
    same = (groups == 1) | BLOCKWISE
    if groups != 1:
        q = first.to(tl.int32) // inner  # (in int32: see NormAct's operand_row)
        offset = (q % groups).to(tl.int64) * size
        same = (q == last.to(tl.int32) // inner) | BLOCKWISE
    return offset, same


@triton.jit
def _normalize(
    centered, rstd, W, B, row, idx, col_ok, mask, cols, first, last, has_scale, has_bias,
    w_inner, w_groups, b_inner, b_groups, activation, storage: tl.constexpr, EVEN: tl.constexpr = False,
    BLOCKWISE: tl.constexpr = False,
):  # fmt: skip
    """act(centered * rstd * scale + bias), masked-off lanes 0: with one scale and bias row for
    the block where its rows share them, else with each row's own (NormAct's ``normalize_rows``).
    ``EVEN``: every lane is a real column, and rows past the end are never stored, so no lane needs
    zeroing (a select per element saved)."""
    w_off, w_same = _block_group(first, last, w_inner, w_groups, cols, BLOCKWISE)
    b_off, b_same = _block_group(first, last, b_inner, b_groups, cols, BLOCKWISE)
    if w_same & b_same:
        scale, bias = load_affine(W + w_off, B + b_off, idx, col_ok, has_scale, has_bias)
        h = normalize_activate(centered, rstd, scale, bias, activation, storage)
    else:
        unused = tl.zeros(idx.shape, tl.float32)  # (its shared-row branch is not taken)
        h = normalize_rows(
            centered, rstd, unused, unused, W, B, row, idx, mask, cols, has_scale, has_bias,
            w_inner, w_groups, b_inner, b_groups, activation, storage,
        )  # fmt: skip
    if EVEN:
        return h
    return tl.where(mask, h, 0.0)


@triton.jit
def _dot_weight_row(
    h, WL, row, k, cols, idx, col_ok, mask, out_features, wl_inner, wl_groups, wl_off, wl_same
):
    """Each row's dot product of ``h`` (the block's columns ``idx``) with row k of its weight
    matrix: one vector load when the block's rows share the matrix, else a tile of each row's own
    (from L1/L2: the matrices are small)."""
    # (each branch names its load apart: the compiler wants a name's type the same in both)
    if wl_same:
        shared = tl.load(WL + wl_off + k * cols + idx, mask=col_ok, other=0.0).to(tl.float32)
        part = tl.sum(h * shared[None, :], axis=1)
    else:
        base = operand_row(row, wl_inner, wl_groups) * (out_features * cols) + k * cols
        own = tl.load(WL + base[:, None] + idx[None, :], mask=mask, other=0.0).to(tl.float32)
        part = tl.sum(h * own, axis=1)
    return part


@triton.jit
def _linear_bias(acc, LB, row, k, row_ok, out_features, lb_inner, lb_groups, lb_off, lb_same):
    """acc + each row's linear bias k (its own where the block's rows do not share one)."""
    if lb_same:
        acc = acc + tl.load(LB + lb_off + k).to(tl.float32)
    else:
        base = operand_row(row, lb_inner, lb_groups) * out_features
        acc = acc + tl.load(LB + base + k, mask=row_ok, other=0.0).to(tl.float32)
    return acc


@triton.jit
def norm_act_linear_kernel(
    X, R, W, B, WL, LB, Y, S,
    rows, cols, out_features, stride_x, stride_r,
    eps, norm, activation, out_activation, has_scale, has_bias, has_linear_bias, has_residual, write_sum,
    w_inner, w_groups, b_inner, b_groups, r_inner, r_groups, wl_inner, wl_groups, lb_inner, lb_groups,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOPED: tl.constexpr, EVEN: tl.constexpr,
    SHARED: tl.constexpr, BLOCKWISE: tl.constexpr = False, OUT_FEATURES: tl.constexpr = 0,
    TAIL_N: tl.constexpr = 0,
):  # fmt: skip
    if OUT_FEATURES != 0:
        # The variant for launches of exactly this many outputs (the launcher chose it for K): a
        # constant, so the loop over K and its bounds checks compile away. The argument is still
        # passed (the same parameter list in every variant) and ignored.
        out_features = OUT_FEATURES
    if SHARED:
        # Every row reads the same scale, bias, weight and linear bias (the launcher chose this
        # variant for group counts of 1): constants, so no per-row branch is compiled in.
        w_inner, w_groups, b_inner, b_groups = 1, 1, 1, 1
        wl_inner, wl_groups, lb_inner, lb_groups = 1, 1, 1, 1
    first = tl.program_id(0).to(tl.int64) * BLOCK_M
    last = tl.minimum(first + BLOCK_M, rows) - 1
    row = first + tl.arange(0, BLOCK_M)
    row_ok = row < rows
    x_row = row[:, None] * stride_x
    r_base = operand_rows(row, r_inner, r_groups, rows) * stride_r
    s_row = row[:, None] * cols
    y_row = row * out_features
    wl_off, wl_same = _block_group(first, last, wl_inner, wl_groups, out_features * cols, BLOCKWISE)
    lb_off, lb_same = _block_group(first, last, lb_inner, lb_groups, out_features, BLOCKWISE)
    offs = tl.arange(0, BLOCK_N)
    if TAIL_N > 0:  # (rows of BLOCK_N + TAIL_N columns as two tiles, operands shared)
        two_piece_rows(
            X, R, W, B, WL, LB, Y, S, row, row_ok, r_base, stride_x, out_features, eps, norm, activation,
            out_activation, has_scale, has_bias, has_linear_bias, has_residual, write_sum, BLOCK_N, TAIL_N,
        )  # fmt: skip
    elif not LOOPED:
        col_ok = offs < cols
        mask = row_ok[:, None] & col_ok[None, :]
        r_off, s_off = r_base[:, None] + offs, s_row + offs
        if BLOCKWISE and X.dtype.element_ty == tl.float32 and BLOCK_N <= EARLY_OPERAND_COLS:
            # One row of scale and bias serves the block: loaded in flight with X, not waited for
            # after its sums.
            w_off, _ = _block_group(first, last, w_inner, w_groups, cols, BLOCKWISE)
            b_off, _ = _block_group(first, last, b_inner, b_groups, cols, BLOCKWISE)
            scale, bias = load_affine(W + w_off, B + b_off, offs, col_ok, has_scale, has_bias)
            x = load_sum(X, R, S, x_row + offs, r_off, s_off, mask, has_residual, write_sum)
            centered, rstd = block_stats(x, mask, cols, norm, eps, EVEN)
            h = normalize_activate(centered, rstd, scale, bias, activation, Y.dtype.element_ty)
            if not EVEN:
                h = tl.where(mask, h, 0.0)
        else:
            x = load_sum(X, R, S, x_row + offs, r_off, s_off, mask, has_residual, write_sum)
            centered, rstd = block_stats(x, mask, cols, norm, eps, EVEN)
            h = _normalize(
                centered, rstd, W, B, row, offs, col_ok, mask, cols, first, last, has_scale, has_bias,
                w_inner, w_groups, b_inner, b_groups, activation, Y.dtype.element_ty, EVEN, BLOCKWISE,
            )  # fmt: skip
        # One output column at a time: the weight row comes from L1/L2, the product never
        # leaves registers, and a narrow K keeps this loop short.
        for k in range(0, out_features):
            acc = _dot_weight_row(
                h, WL, row, k, cols, offs, col_ok, mask, out_features, wl_inner, wl_groups, wl_off, wl_same
            )
            if has_linear_bias:
                acc = _linear_bias(
                    acc, LB, row, k, row_ok, out_features, lb_inner, lb_groups, lb_off, lb_same
                )
            acc = apply_activation(acc, out_activation, Y.dtype.element_ty)
            tl.store(Y + y_row + k, acc.to(Y.dtype.element_ty), mask=row_ok)
    else:
        # One pass for the statistics, shifted by the first chunk's mean (row_norm): a pass of its
        # own for the pivot would read the row once more.
        mask = row_ok[:, None] & (offs < cols)[None, :]
        r_off, s_off = r_base[:, None] + offs, s_row + offs
        x = load_sum(X, R, S, x_row + offs, r_off, s_off, mask, has_residual, write_sum)
        shift = row_pivot(x, tl.minimum(cols, BLOCK_N).to(tl.float32), norm)
        zeros = tl.zeros([BLOCK_M], tl.float32)
        shifted = tl.where(mask, x - shift[:, None], 0.0)
        mean, m2 = chunk_stats_update(shifted, mask, 0, cols, norm, zeros, zeros, BLOCK_N)
        for start in range(BLOCK_N, cols, BLOCK_N):
            idx = start + offs
            mask = row_ok[:, None] & (idx < cols)[None, :]
            r_off, s_off = r_base[:, None] + idx, s_row + idx
            x = load_sum(X, R, S, x_row + idx, r_off, s_off, mask, has_residual, write_sum)
            shifted = tl.where(mask, x - shift[:, None], 0.0)
            mean, m2 = chunk_stats_update(shifted, mask, start, cols, norm, mean, m2, BLOCK_N)
        rstd = finish_stats(m2, cols, eps)
        # Rows too long for one block are re-read (mostly from L2) once per LOOP_BLOCK_K outputs,
        # accumulating a [BLOCK_M, LOOP_BLOCK_K] tile; X + R is recomputed, not read back.
        kk = tl.arange(0, LOOP_BLOCK_K)
        for k0 in range(0, out_features, LOOP_BLOCK_K):
            acc = tl.zeros([BLOCK_M, LOOP_BLOCK_K], tl.float32)
            k_count = tl.minimum(out_features - k0, LOOP_BLOCK_K)
            for start in range(0, cols, BLOCK_N):
                idx = start + offs
                col_ok = idx < cols
                mask = row_ok[:, None] & col_ok[None, :]
                x = load_sum(X, R, S, x_row + idx, r_base[:, None] + idx, s_row + idx, mask, has_residual, 0)
                h = _normalize(
                    center(x, shift, mean), rstd, W, B, row, idx, col_ok, mask, cols, first, last,
                    has_scale, has_bias, w_inner, w_groups, b_inner, b_groups, activation, Y.dtype.element_ty,
                    False, BLOCKWISE,
                )  # fmt: skip
                for j in range(0, k_count):
                    part = _dot_weight_row(
                        h, WL, row, k0 + j, cols, idx, col_ok, mask, out_features, wl_inner, wl_groups,
                        wl_off, wl_same,
                    )  # fmt: skip
                    acc = acc + tl.where(kk[None, :] == j, part[:, None], 0.0)
            k_ok = kk < k_count
            out_mask = row_ok[:, None] & k_ok[None, :]
            if has_linear_bias:
                if lb_same:
                    acc = acc + tl.load(LB + lb_off + k0 + kk, mask=k_ok, other=0.0).to(tl.float32)[None, :]
                else:
                    lb_row = operand_row(row, lb_inner, lb_groups) * out_features
                    lb = tl.load(LB + lb_row[:, None] + k0 + kk[None, :], mask=out_mask, other=0.0)
                    acc = acc + lb.to(tl.float32)
            acc = apply_activation(acc, out_activation, Y.dtype.element_ty)
            tl.store(Y + y_row[:, None] + k0 + kk[None, :], acc.to(Y.dtype.element_ty), mask=out_mask)


def launch_norm_act_linear(
    x2d, scale, bias, weight, linear_bias, y, *, norm: int, activation: int, out_activation: int,
    eps: float, wrap=lambda kernel: kernel, residual2d=None, residual_sum=None, scale_rows=(1, 1),
    bias_rows=(1, 1), residual_rows=None, weight_rows=(1, 1), linear_bias_rows=(1, 1),
):  # fmt: skip
    """Launches NormActLinear on torch tensors: ``weight`` contiguous [K, D] or [groups, K, D], ``y``
    preallocated contiguous [rows, K]; with ``residual2d`` ([groups, D] rows with their own stride,
    X's rows by default) the sum is written to ``residual_sum`` (contiguous [rows, D]) unless it is
    None. ``*_rows`` are (inner, groups) of the operands that broadcast over X's rows
    (graphopt.fused.broadcast_rows); scale, bias and linear bias are then contiguous [groups, D]
    and [groups, K]. ``wrap`` may be ``torch.library.wrap_triton``."""
    rows, cols = x2d.shape
    out_features = weight.shape[-2]
    residual_rows = residual_rows or (1, rows)
    has_residual = residual2d is not None
    strides = (x2d.stride(0), residual2d.stride(0) if has_residual else 0)
    aligned = is_aligned(cols, strides)
    uniform = uniform_rows(scale_rows, bias_rows, weight_rows, linear_bias_rows)
    config = norm_act_linear_config(rows, cols, dtype_name(x2d), aligned, uniform, out_features)
    write_sum = has_residual and residual_sum is not None
    if rows == 0 or (out_features == 0 and not write_sum):
        return config
    tier = config.tier
    wrap(norm_act_linear_kernel)[config.grid](
        x2d, residual2d if has_residual else x2d, scale if scale is not None else x2d,
        bias if bias is not None else x2d, weight, linear_bias if linear_bias is not None else weight, y,
        residual_sum if write_sum else unwritten_output(y, wrap),
        rows, cols, out_features, strides[0], strides[1],
        float(eps), int(norm), int(activation), int(out_activation),
        int(scale is not None), int(bias is not None), int(linear_bias is not None), int(has_residual),
        int(write_sum),
        *map(int, (*scale_rows, *bias_rows, *residual_rows, *weight_rows, *linear_bias_rows)),
        BLOCK_M=tier.block_m, BLOCK_N=tier.block_n, LOOPED=tier.looped, EVEN=tier.exact,
        SHARED=tier.shared, BLOCKWISE=tier.blockwise, OUT_FEATURES=tier.out_features, TAIL_N=tier.tail,
        num_warps=tier.num_warps,
    )  # fmt: skip
    return config


# The ahead-of-time build's view (graphopt.kernels.kernel_spec): (name, type) of every runtime
# argument, "*" a pointer to the storage dtype, in the order of the kernel and of cuda_launch.cc.
_AOT_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("WL", "*"), ("LB", "*"), ("Y", "*"), ("S", "*"),
    ("rows", "i32"), ("cols", "i32"), ("out_features", "i32"), ("stride_x", "i64"), ("stride_r", "i64"),
    ("eps", "fp32"), ("norm", "i32"), ("activation", "i32"), ("out_activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_linear_bias", "i32"), ("has_residual", "i32"),
    ("write_sum", "i32"),
    ("w_inner", "i32"), ("w_groups", "i32"), ("b_inner", "i32"), ("b_groups", "i32"),
    ("r_inner", "i32"), ("r_groups", "i32"), ("wl_inner", "i32"), ("wl_groups", "i32"),
    ("lb_inner", "i32"), ("lb_groups", "i32"),
)  # fmt: skip
AOT_KERNEL = KernelSpec(
    "NormActLinear", norm_act_linear_kernel, _AOT_ARGS,
    ("X", "R", "W", "B", "WL", "S", "cols", "stride_x", "stride_r"), norm_act_linear_tiers,
    ("BLOCK_M", "BLOCK_N", "LOOPED", "EVEN", "SHARED", "BLOCKWISE", "OUT_FEATURES", "TAIL_N"),
)  # fmt: skip
