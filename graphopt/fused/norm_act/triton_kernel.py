"""NormAct: Y = act(norm(X [+ R]) * scale + bias), and ResidualSum = X + R when R is given.

One Triton kernel serves PyTorch (JIT) and ONNX Runtime (compiled ahead of time). Storage is
fp32, fp16 or bf16; statistics and math are fp32; outputs take the input's dtype. X and R are
[rows, cols] views with their own row strides (last dimension contiguous); Y and ResidualSum are
contiguous. The norm kind, the activation and which optional inputs exist are runtime integers
(uniform branches, or masks for the scale and bias), so the compiled variants differ only in dtype,
block shape and whether every row reads the one scale and bias row (see ``NORM_ACT_TIERS``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import (
    ELEMENT_BYTES,
    LaunchConfig,
    Tier,
    configure,
    is_aligned,
    row_tiers,
    uniform_rows,
    unwritten_output,
)
from graphopt.kernels.ptx import widen
from graphopt.kernels.row_norm import (
    apply_activation,
    block_stats,
    center,
    chunk_stats_update,
    finish_stats,
    load_affine,
    masked_by,
    normalize_activate,
    row_pivot,
    two_tile_stats,
)

EARLY_AFFINE_COLS = tl.constexpr(1024)  # rows up to this long load scale and bias with the row


@triton.jit
def load_sum(X, R, S, x_off, r_off, s_off, mask, has_residual, write_sum):
    """Loads a block of X (+ R, rounded to storage precision, as the unfused graph stores it).
    (A branch, not a mask as for the scale and bias: a masked-off R load and ResidualSum store in
    every block cost short rows about 10% where there is no residual.)"""
    x = tl.load(X + x_off, mask=mask, other=0.0)
    if has_residual:
        r = tl.load(R + r_off, mask=mask, other=0.0)
        # Add in fp32 and round once, as PyTorch and ONNX Runtime do for 16-bit adds.
        s = (widen(x) + widen(r)).to(x.dtype)
        if write_sum:
            tl.store(S + s_off, s, mask=mask)
        x = s
    return widen(x)


@triton.jit
def operand_row(row, inner, groups):
    """``(row // inner) % groups``, the operand row read by X's row ``row`` (graphopt.fused.broadcast_rows),
    divided in int32 and returned as int64 for offsets: row counts are int32 arguments, so every row
    index fits, and the GPU has no int64 division (each is tens of emulated instructions per thread,
    as many as a 16-bit row's own arithmetic at D = 256)."""
    return ((row.to(tl.int32) // inner) % groups).to(tl.int64)


@triton.jit
def operand_rows(row, inner, groups, rows):
    """The operand's row read by each of X's rows (graphopt.fused.broadcast_rows): X's own row when
    the operand has X's shape (a uniform branch: that case does no division)."""
    if inner != 1 or groups != rows:
        row = operand_row(row, inner, groups)
    return row


@triton.jit
def normalize_rows(
    centered, rstd, scale, bias, W, B, row, idx, mask, cols, has_scale, has_bias,
    w_inner, w_groups, b_inner, b_groups, activation, storage: tl.constexpr,
):  # fmt: skip
    """act(centered * rstd * scale + bias): with the row's scale and bias (``scale`` and ``bias``,
    loaded once) when they are shared by all rows, else with [rows, cols] tiles of the rows that
    the block's rows read (a uniform branch: the shared case runs today's code)."""
    if w_groups == 1 and b_groups == 1:
        y = normalize_activate(centered, rstd, scale, bias, activation, storage)
    else:
        w_row = operand_row(row, w_inner, w_groups) * cols
        b_row = operand_row(row, b_inner, b_groups) * cols
        w = widen(tl.load(W + w_row[:, None] + idx[None, :], mask=masked_by(mask, has_scale), other=1.0))
        b = widen(tl.load(B + b_row[:, None] + idx[None, :], mask=masked_by(mask, has_bias), other=0.0))
        y = apply_activation(centered * rstd[:, None] * w + b, activation, storage)
    return y


@triton.jit
def _finish_block(
    x, row, y_off, mask, offs, scale, bias, W, B, Y, cols, eps, norm, activation, has_scale, has_bias,
    w_inner, w_groups, b_inner, b_groups, EVEN: tl.constexpr,
):  # fmt: skip
    centered, rstd = block_stats(x, mask, cols, norm, eps, EVEN)
    y = normalize_rows(
        centered, rstd, scale, bias, W, B, row, offs, mask, cols, has_scale, has_bias,
        w_inner, w_groups, b_inner, b_groups, activation, Y.dtype.element_ty,
    )  # fmt: skip
    tl.store(Y + y_off, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def two_tiles(
    X, R, S, row, row_ok, r_base, stride_x, eps, norm, has_residual, write_sum,
    HEAD_N: tl.constexpr, TAIL_N: tl.constexpr,
):  # fmt: skip
    """Rows of exactly HEAD_N + TAIL_N columns (both powers of two) read as two unmasked tiles, a head
    and a tail (X + R, its sum stored where asked), and their statistics: (shifted head, shifted tail,
    mean, rstd, head mask, tail mask, the rows' offsets in S and in Y-shaped outputs). No lane holds
    padding, where one tile of the next power of two would leave up to 3/8 of its lanes idle. The
    head-and-tail paths of NormAct and NormActLinear start here."""
    cols: tl.constexpr = HEAD_N + TAIL_N
    head, tail = tl.arange(0, HEAD_N), HEAD_N + tl.arange(0, TAIL_N)
    # (every column is real: only rows past the end are masked)
    h_mask, t_mask = row_ok[:, None] & (head < cols)[None, :], row_ok[:, None] & (tail < cols)[None, :]
    x_row, r_row, s_row = row[:, None] * stride_x, r_base[:, None], row[:, None] * cols
    xh = load_sum(X, R, S, x_row + head, r_row + head, s_row + head, h_mask, has_residual, write_sum)
    xt = load_sum(X, R, S, x_row + tail, r_row + tail, s_row + tail, t_mask, has_residual, write_sum)
    xh, xt, mean, rstd = two_tile_stats(xh, xt, norm, eps)
    return xh, xt, mean, rstd, h_mask, t_mask, s_row


@triton.jit
def two_piece_block(
    X, R, W, B, Y, S, row, row_ok, r_base, stride_x, eps, norm, activation, has_scale, has_bias,
    has_residual, HEAD_N: tl.constexpr, TAIL_N: tl.constexpr,
):  # fmt: skip
    """NormAct on a block of rows of exactly HEAD_N + TAIL_N columns (``two_tiles``), scale and bias
    shared by all rows."""
    cols: tl.constexpr = HEAD_N + TAIL_N
    head, tail = tl.arange(0, HEAD_N), HEAD_N + tl.arange(0, TAIL_N)
    xh, xt, mean, rstd, h_mask, t_mask, y_row = two_tiles(
        X, R, S, row, row_ok, r_base, stride_x, eps, norm, has_residual, True, HEAD_N, TAIL_N
    )
    storage = Y.dtype.element_ty
    scale, bias = load_affine(W, B, head, head < cols, has_scale, has_bias)
    y = normalize_activate(xh - mean[:, None], rstd, scale, bias, activation, storage)
    tl.store(Y + y_row + head, y.to(storage), mask=h_mask)
    scale, bias = load_affine(W, B, tail, tail < cols, has_scale, has_bias)
    y = normalize_activate(xt - mean[:, None], rstd, scale, bias, activation, storage)
    tl.store(Y + y_row + tail, y.to(storage), mask=t_mask)


@triton.jit
def norm_act_kernel(
    X, R, W, B, Y, S,
    rows, cols, stride_x, stride_r,
    eps, norm, activation, has_scale, has_bias, has_residual,
    w_inner, w_groups, b_inner, b_groups, r_inner, r_groups,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ITERS: tl.constexpr, LOOPED: tl.constexpr,
    EVEN: tl.constexpr, SHARED: tl.constexpr = False, TAIL_N: tl.constexpr = 0,
):  # fmt: skip
    if SHARED:
        # Every row reads the one scale and bias row (the launcher chose this variant for group
        # counts of 1): constants, so the per-row operand code, its branch and its registers are not
        # compiled into the ahead-of-time kernel (Triton's JIT folds them at such calls by itself).
        w_inner, w_groups, b_inner, b_groups = 1, 1, 1, 1
    offs = tl.arange(0, BLOCK_N)
    pid = tl.program_id(0).to(tl.int64)
    row = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = row < rows
    # Row offsets into R; scale and bias rows are picked where they are applied (``normalize_rows``).
    r_base = operand_rows(row, r_inner, r_groups, rows) * stride_r
    if TAIL_N > 0:
        two_piece_block(
            X, R, W, B, Y, S, row, row_ok, r_base, stride_x, eps, norm, activation, has_scale, has_bias,
            has_residual, BLOCK_N, TAIL_N,
        )  # fmt: skip
    elif not LOOPED:
        col_ok = offs < cols
        mask = row_ok[:, None] & col_ok[None, :]
        x_off, r_off, y_off = (
            row[:, None] * stride_x + offs,
            r_base[:, None] + offs,
            row[:, None] * cols + offs,
        )
        if ITERS == 1:
            if BLOCK_N <= EARLY_AFFINE_COLS:
                # Short rows: scale and bias in flight with the row, not waited for after its sums.
                scale, bias = load_affine(W, B, offs, col_ok, has_scale, has_bias)
            x = load_sum(X, R, S, x_off, r_off, y_off, mask, has_residual, True)
            centered, rstd = block_stats(x, mask, cols, norm, eps, EVEN)
            if BLOCK_N > EARLY_AFFINE_COLS:
                # Long rows load them only now (from L1/L2), keeping no extra registers live
                # through the statistics.
                scale, bias = load_affine(W, B, offs, col_ok, has_scale, has_bias)
            y = normalize_rows(
                centered, rstd, scale, bias, W, B, row, offs, mask, cols, has_scale, has_bias,
                w_inner, w_groups, b_inner, b_groups, activation, Y.dtype.element_ty,
            )  # fmt: skip
            tl.store(Y + y_off, y.to(Y.dtype.element_ty), mask=mask)
        else:
            # A program also takes blocks pid + i * grid, loading the next block before finishing
            # the current one, so a load is in flight while the math and stores run; short rows
            # afford keeping scale and bias in registers across the blocks.
            scale, bias = load_affine(W, B, offs, col_ok, has_scale, has_bias)
            x = load_sum(X, R, S, x_off, r_off, y_off, mask, has_residual, True)
            for i in range(1, ITERS):
                nrow = (pid + i * tl.num_programs(0)) * BLOCK_M + tl.arange(0, BLOCK_M)
                nrow_ok = nrow < rows
                nmask = nrow_ok[:, None] & col_ok[None, :]
                nr_base = operand_rows(nrow, r_inner, r_groups, rows) * stride_r
                nx_off, nr_off = nrow[:, None] * stride_x + offs, nr_base[:, None] + offs
                ny_off = nrow[:, None] * cols + offs
                nx = load_sum(X, R, S, nx_off, nr_off, ny_off, nmask, has_residual, True)
                _finish_block(
                    x, row, y_off, mask, offs, scale, bias, W, B, Y, cols, eps, norm, activation,
                    has_scale, has_bias, w_inner, w_groups, b_inner, b_groups, EVEN,
                )  # fmt: skip
                x, row, y_off, mask = nx, nrow, ny_off, nmask
            _finish_block(
                x, row, y_off, mask, offs, scale, bias, W, B, Y, cols, eps, norm, activation,
                has_scale, has_bias, w_inner, w_groups, b_inner, b_groups, EVEN,
            )  # fmt: skip
    else:
        x_row = row[:, None] * stride_x
        r_row = r_base[:, None]
        y_row = row[:, None] * cols
        # One pass for the statistics, shifted by the first chunk's mean (row_norm): a pass of its
        # own for the pivot would read the row once more.
        mask = row_ok[:, None] & (offs < cols)[None, :]
        x = load_sum(X, R, S, x_row + offs, r_row + offs, y_row + offs, mask, has_residual, True)
        shift = row_pivot(x, tl.minimum(cols, BLOCK_N).to(tl.float32), norm)
        zeros = tl.zeros([BLOCK_M], tl.float32)
        shifted = tl.where(mask, x - shift[:, None], 0.0)
        mean, m2 = chunk_stats_update(shifted, mask, 0, cols, norm, zeros, zeros, BLOCK_N)
        for start in range(BLOCK_N, cols, BLOCK_N):
            idx = start + offs
            mask = row_ok[:, None] & (idx < cols)[None, :]
            x = load_sum(X, R, S, x_row + idx, r_row + idx, y_row + idx, mask, has_residual, True)
            shifted = tl.where(mask, x - shift[:, None], 0.0)
            mean, m2 = chunk_stats_update(shifted, mask, start, cols, norm, mean, m2, BLOCK_N)
        rstd = finish_stats(m2, cols, eps)
        # The second pass recomputes X + R rather than reading back ResidualSum: no ordering
        # between this program's stores and loads is needed, and the re-read mostly hits L2.
        for start in range(0, cols, BLOCK_N):
            idx = start + offs
            col_ok = idx < cols
            mask = row_ok[:, None] & col_ok[None, :]
            x = load_sum(X, R, S, x_row + idx, r_row + idx, y_row + idx, mask, has_residual, False)
            scale, bias = load_affine(W, B, idx, col_ok, has_scale, has_bias)
            centered = center(x, shift, mean)
            y = normalize_rows(
                centered, rstd, scale, bias, W, B, row, idx, mask, cols, has_scale, has_bias,
                w_inner, w_groups, b_inner, b_groups, activation, Y.dtype.element_ty,
            )  # fmt: skip
            tl.store(Y + y_row + idx, y.to(Y.dtype.element_ty), mask=mask)


# (block_n, block_m, num_warps[, iters]), measured on an H100 at 256, 1024, 4096 and 8192 (other
# lengths interpolate): about 16 values per thread (four or two 16-byte vectors), small programs
# for short rows, whole rows with more warps for long ones; iters > 1 where overlapping a
# program's next load with its math paid off. 16-bit rows that are not a power of two (masked
# tiers) take one row per program at 512, 1024 and 4096: 7-14% faster than two at 384, 640, 768,
# 2560 and 3072 on an H100 (bench/results/2026-11-27-h100c/widths_candidates_masked.md).
_ROW_SHAPES = {
    4: ((128, 4, 1, 2), (256, 2, 1, 2), (512, 4, 4), (1024, 2, 4), (2048, 1, 4),
        (4096, 1, 8), (8192, 1, 16)),
    2: ((128, 4, 1), (256, 2, 1), (512, 1, 1), (1024, 1, 2), (2048, 1, 4),
        (4096, 1, 4), (8192, 1, 8)),
}  # fmt: skip
# Rows of exactly a power-of-two width (the usual case) get tiers of their own, with no column mask,
# measured on an H100 (bench/results/norm_act_exact_tiers.json).
_EXACT_SHAPES = {
    4: ((128, 4, 1, 2), (256, 2, 1, 2), (512, 4, 4), (1024, 4, 8), (2048, 1, 4),
        (4096, 1, 8), (8192, 1, 16)),
    2: ((128, 16, 8), (256, 4, 1), (512, 2, 2), (1024, 1, 2), (2048, 1, 4),
        (4096, 1, 8), (8192, 1, 8)),
}  # fmt: skip
_LOOP = {4: (4096, 8), 2: (4096, 8)}  # (chunk, num_warps) for rows longer than the last shape
# Rows whose length is not a multiple of 16 (rare) get one unvectorized shape and the loop.
_UNALIGNED_SHAPES = ((1024, 2, 4),)


# Every aligned single-block tier comes first as its shared-operand copy (scale and bias one row for all
# rows, as in nearly every model). Compiled ahead of time without the per-row operand code, the fp32
# 8192-wide variants need 63 registers a thread instead of 80, so two of their 512-thread programs fit
# on a multiprocessor instead of one: through the C++ launcher on an H100, fp32 D = 5120 447 -> 268 µs,
# D = 8192 523 -> 357, bf16 D = 5120 225 -> 187 (bench/results/2026-11-27-h100f). The looped tier
# keeps no such copy: its shared-operand variant took 715 µs at fp32 D = 12288, the general one 602.
# Widths of two powers of two that a head and a tail tile serve faster than the padded block or the
# looped tier, (head, tail, block_m, num_warps), measured on an H100 at 16384 rows (LayerNorm + GELU,
# before against after in one lease, both runtimes): fp32 5120 263 -> 229 µs and 12288 713 -> 536 µs
# (1.01x a copy; torch.compile 260 and 611), 16-bit 1536 and 3072 11-18% faster (2026-11-27-h100f);
# 16-bit 640, 1280, 2560 and 5120 (2026-11-28-h100): fp16 4-9% faster through PyTorch and 9-22%
# through ONNX Runtime, bf16 through ONNX Runtime 11-31% faster (5120 224 -> 154 µs) and through
# PyTorch 7% faster at 640, the same at 1280 and 5120, 1.6% slower at 2560 (85.0 against 83.7 µs;
# 1.2% in an earlier run). Not faster: fp32 384, 16-bit 384 (2026-11-28-h100/cand16), 16-bit 12288
# (2-10% slower than the looped tier). Shared operands only.
# 16-bit 768 (512 + 256) and 1280 (1024 + 256) run on one warp: a 256-column tail on two warps holds 4
# values a thread, and their 768 tier was 25% slower than the padded block on an H100 (cand16), where one
# warp, whose row sums need no barrier, is the fastest shape measured. On an H200 at 16384 rows
# (2026-11-28-h200e, before against after in one lease, both runtimes): NormAct 768 15-20% faster
# (bf16 23.3 -> 19.8 µs through PyTorch, 25.2 -> 20.3 through ONNX Runtime), 1280 8-26% faster; with a
# residual, bf16 1280 7-8% faster, 768 between 3.5% faster (bf16) and 3% slower (fp16).
_TWO_PIECE = {
    4: ((4096, 1024, 1, 8), (8192, 4096, 1, 16)),
    2: ((512, 128, 2, 2), (512, 256, 1, 1), (1024, 256, 1, 1), (1024, 512, 1, 2), (2048, 512, 1, 4),
        (2048, 1024, 1, 4), (4096, 1024, 1, 8)),
}  # fmt: skip


def _tiers(size: int) -> tuple[Tier, ...]:
    aligned = row_tiers(
        _ROW_SHAPES[size], loop=_LOOP[size], aligned=True, exact=_EXACT_SHAPES[size], shared={}
    )
    two_piece = tuple(
        Tier(head + tail, m, head, w, exact=True, shared=True, tail=tail)
        for head, tail, m, w in _TWO_PIECE[size]
    )
    return (
        *two_piece,  # (each serves its one width, ahead of the padded tier that would also take it)
        *(tier for tier in aligned if not (tier.shared and tier.looped)),
        *row_tiers(_UNALIGNED_SHAPES, loop=(2048, 4), aligned=False),
    )


NORM_ACT_TIERS: dict[int, tuple[Tier, ...]] = {size: _tiers(size) for size in (4, 2)}


def norm_act_tiers(dtype: str) -> tuple[Tier, ...]:
    return NORM_ACT_TIERS[ELEMENT_BYTES[dtype]]


def norm_act_config(rows: int, cols: int, dtype: str, aligned: bool = True, uniform: int = 0) -> LaunchConfig:
    """The launch of NormAct on ``rows`` rows of ``cols`` elements of ``dtype`` (a name such as
    "bfloat16"); ``aligned`` as decided by ``launch_rules.is_aligned``; ``uniform``: the
    ``uniform_rows`` of scale and bias (0, the usual case: one row of each for all rows)."""
    return configure(norm_act_tiers(dtype), rows, cols, aligned, uniform)


def dtype_name(tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def launch_norm_act(
    x2d, scale, bias, residual2d, y, residual_sum, *, norm: int, activation: int, eps: float,
    wrap=lambda kernel: kernel, scale_rows=(1, 1), bias_rows=(1, 1), residual_rows=None,
):  # fmt: skip
    """Launches NormAct on torch tensors; ``y`` (and ``residual_sum`` with a residual) are
    preallocated contiguous [rows, cols]. ``wrap`` may be ``torch.library.wrap_triton``.
    ``*_rows`` are (inner, groups) of operands that broadcast over X's rows
    (graphopt.fused.broadcast_rows); scale and bias are then contiguous [groups, cols], the residual
    [groups, cols] with its own row stride. The residual has X's rows by default."""
    rows, cols = x2d.shape
    residual_rows = residual_rows or (1, rows)
    has_residual = residual2d is not None
    strides = (x2d.stride(0), residual2d.stride(0) if has_residual else 0)
    aligned = is_aligned(cols, strides)
    config = norm_act_config(rows, cols, dtype_name(x2d), aligned, uniform_rows(scale_rows, bias_rows))
    if rows == 0:
        return config
    tier = config.tier
    wrap(norm_act_kernel)[config.grid](
        x2d, residual2d if has_residual else x2d, scale if scale is not None else x2d,
        bias if bias is not None else x2d, y,
        residual_sum if has_residual else unwritten_output(y, wrap),
        rows, cols, strides[0], strides[1],
        float(eps), int(norm), int(activation),
        int(scale is not None), int(bias is not None), int(has_residual),
        *map(int, (*scale_rows, *bias_rows, *residual_rows)),
        BLOCK_M=tier.block_m, BLOCK_N=tier.block_n, ITERS=tier.iters, LOOPED=tier.looped,
        EVEN=tier.exact, SHARED=tier.shared, TAIL_N=tier.tail, num_warps=tier.num_warps,
    )  # fmt: skip
    return config


# The ahead-of-time build's view (graphopt.kernels.kernel_spec): (name, type) of every runtime
# argument, "*" a pointer to the storage dtype, in the order of the kernel and of cuda_launch.cc.
_AOT_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"),
    ("rows", "i32"), ("cols", "i32"), ("stride_x", "i64"), ("stride_r", "i64"),
    ("eps", "fp32"), ("norm", "i32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"),
    ("w_inner", "i32"), ("w_groups", "i32"), ("b_inner", "i32"), ("b_groups", "i32"),
    ("r_inner", "i32"), ("r_groups", "i32"),
)  # fmt: skip
AOT_KERNEL = KernelSpec(
    "NormAct", norm_act_kernel, _AOT_ARGS,
    ("X", "R", "W", "B", "Y", "S", "cols", "stride_x", "stride_r"), norm_act_tiers,
    ("BLOCK_M", "BLOCK_N", "ITERS", "LOOPED", "EVEN", "SHARED", "TAIL_N"),
)  # fmt: skip
