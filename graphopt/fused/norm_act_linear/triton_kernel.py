"""NormActLinear: Y = out_act(act(norm(X) * scale + bias) @ Weight^T + linear_bias).

A norm and activation over the last dimension D followed by a narrow linear layer (Weight is
[K, D], K small): each row of X is read once, its normalized and activated values never leave
the chip, and only K numbers per row are written. Storage fp32/fp16/bf16, all math and the dot
products in fp32, Y [rows, K] contiguous in X's dtype. X rows may be strided.
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.fused.norm_act.triton_kernel import dtype_name
from graphopt.kernels.activations import apply_activation
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import (
    ELEMENT_BYTES,
    LaunchConfig,
    Tier,
    configure,
    is_aligned,
    row_tiers,
)
from graphopt.kernels.ptx import widen
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


@triton.jit
def _linear_out(acc, LB, k, has_linear_bias, out_activation, storage: tl.constexpr):
    if has_linear_bias:
        acc = acc + tl.load(LB + k).to(tl.float32)
    return apply_activation(acc, out_activation, storage)


@triton.jit
def norm_act_linear_kernel(
    X, W, B, WL, LB, Y,
    rows, cols, out_features, stride_x,
    eps, norm, activation, out_activation, has_scale, has_bias, has_linear_bias,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOPED: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = row < rows
    x_row = row[:, None] * stride_x
    y_row = row * out_features
    offs = tl.arange(0, BLOCK_N)
    if not LOOPED:
        col_ok = offs < cols
        mask = row_ok[:, None] & col_ok[None, :]
        x = widen(tl.load(X + x_row + offs, mask=mask, other=0.0))
        centered, rstd = block_stats(x, mask, cols, norm, eps, False)
        scale, bias = load_affine(W, B, offs, col_ok, has_scale, has_bias)
        h = normalize_activate(centered, rstd, scale, bias, activation, Y.dtype.element_ty)
        h = tl.where(mask, h, 0.0)
        # One output column at a time: the weight row comes from L1/L2, the product never
        # leaves registers, and a narrow K keeps this loop short.
        for k in range(0, out_features):
            w = tl.load(WL + k * cols + offs, mask=col_ok, other=0.0).to(tl.float32)
            acc = tl.sum(h * w[None, :], axis=1)
            acc = _linear_out(acc, LB, k, has_linear_bias, out_activation, Y.dtype.element_ty)
            tl.store(Y + y_row + k, acc.to(Y.dtype.element_ty), mask=row_ok)
    else:
        # One pass for the statistics, shifted by the first chunk's mean (row_norm): a pass of its
        # own for the pivot would read the row once more.
        mask = row_ok[:, None] & (offs < cols)[None, :]
        x = widen(tl.load(X + x_row + offs, mask=mask, other=0.0))
        shift = row_pivot(x, tl.minimum(cols, BLOCK_N).to(tl.float32), norm)
        zeros = tl.zeros([BLOCK_M], tl.float32)
        shifted = tl.where(mask, x - shift[:, None], 0.0)
        mean, m2 = chunk_stats_update(shifted, mask, 0, cols, norm, zeros, zeros, BLOCK_N)
        for start in range(BLOCK_N, cols, BLOCK_N):
            idx = start + offs
            mask = row_ok[:, None] & (idx < cols)[None, :]
            x = widen(tl.load(X + x_row + idx, mask=mask, other=0.0))
            shifted = tl.where(mask, x - shift[:, None], 0.0)
            mean, m2 = chunk_stats_update(shifted, mask, start, cols, norm, mean, m2, BLOCK_N)
        rstd = finish_stats(m2, cols, eps)
        # Rows too long for one block are re-read (mostly from L2) once per LOOP_BLOCK_K outputs,
        # accumulating a [BLOCK_M, LOOP_BLOCK_K] tile.
        kk = tl.arange(0, LOOP_BLOCK_K)
        for k0 in range(0, out_features, LOOP_BLOCK_K):
            acc = tl.zeros([BLOCK_M, LOOP_BLOCK_K], tl.float32)
            k_count = tl.minimum(out_features - k0, LOOP_BLOCK_K)
            for start in range(0, cols, BLOCK_N):
                idx = start + offs
                col_ok = idx < cols
                mask = row_ok[:, None] & col_ok[None, :]
                x = widen(tl.load(X + x_row + idx, mask=mask, other=0.0))
                scale, bias = load_affine(W, B, idx, col_ok, has_scale, has_bias)
                centered = center(x, shift, mean)
                h = normalize_activate(centered, rstd, scale, bias, activation, Y.dtype.element_ty)
                h = tl.where(mask, h, 0.0)
                for j in range(0, k_count):
                    w = tl.load(WL + (k0 + j) * cols + idx, mask=col_ok, other=0.0).to(tl.float32)
                    part = tl.sum(h * w[None, :], axis=1)
                    acc = acc + tl.where(kk[None, :] == j, part[:, None], 0.0)
            k_ok = kk < k_count
            if has_linear_bias:
                acc = acc + tl.load(LB + k0 + kk, mask=k_ok, other=0.0).to(tl.float32)[None, :]
            acc = apply_activation(acc, out_activation, Y.dtype.element_ty)
            out_mask = row_ok[:, None] & k_ok[None, :]
            tl.store(Y + y_row[:, None] + k0 + kk[None, :], acc.to(Y.dtype.element_ty), mask=out_mask)


# (block_n, block_m, num_warps), measured on an H100 at 256 (other lengths follow NormAct). Short
# rows take a few rows per program: the seed shape (D=256, K=1) reads 16 MiB and writes almost
# nothing, so it lives on many small programs in flight.
_ROW_SHAPES = {
    4: ((128, 4, 1), (256, 2, 1), (512, 2, 2), (1024, 2, 4), (2048, 1, 4),
        (4096, 1, 8), (8192, 1, 16)),
    2: ((128, 8, 2), (256, 4, 2), (512, 2, 2), (1024, 2, 4), (2048, 1, 4),
        (4096, 1, 8), (8192, 1, 8)),
}  # fmt: skip
_LOOP = {4: (4096, 8), 2: (4096, 8)}
_UNALIGNED_SHAPES = ((1024, 2, 4),)

NORM_ACT_LINEAR_TIERS: dict[int, tuple[Tier, ...]] = {
    size: (
        *row_tiers(_ROW_SHAPES[size], loop=_LOOP[size], aligned=True),
        *row_tiers(_UNALIGNED_SHAPES, loop=(2048, 4), aligned=False),
    )
    for size in (4, 2)
}


def norm_act_linear_tiers(dtype: str) -> tuple[Tier, ...]:
    return NORM_ACT_LINEAR_TIERS[ELEMENT_BYTES[dtype]]


def norm_act_linear_config(rows: int, cols: int, dtype: str, aligned: bool = True) -> LaunchConfig:
    """The launch of NormActLinear on ``rows`` rows of ``cols`` (= D) elements of ``dtype``."""
    return configure(norm_act_linear_tiers(dtype), rows, cols, aligned)


def launch_norm_act_linear(
    x2d, scale, bias, weight, linear_bias, y, *, norm: int, activation: int, out_activation: int,
    eps: float, wrap=lambda kernel: kernel,
):  # fmt: skip
    """Launches NormActLinear on torch tensors: ``weight`` [K, D] contiguous, ``y`` preallocated
    contiguous [rows, K]. ``wrap`` may be ``torch.library.wrap_triton``."""
    rows, cols = x2d.shape
    out_features = weight.shape[0]
    aligned = is_aligned(cols, (x2d.stride(0),))
    config = norm_act_linear_config(rows, cols, dtype_name(x2d), aligned)
    if rows == 0 or out_features == 0:
        return config
    tier = config.tier
    wrap(norm_act_linear_kernel)[config.grid](
        x2d, scale if scale is not None else x2d, bias if bias is not None else x2d, weight,
        linear_bias if linear_bias is not None else weight, y,
        rows, cols, out_features, x2d.stride(0),
        float(eps), int(norm), int(activation), int(out_activation),
        int(scale is not None), int(bias is not None), int(linear_bias is not None),
        BLOCK_M=tier.block_m, BLOCK_N=tier.block_n, LOOPED=tier.looped, num_warps=tier.num_warps,
    )  # fmt: skip
    return config


# The ahead-of-time build's view (graphopt.kernels.kernel_spec): (name, type) of every runtime
# argument, "*" a pointer to the storage dtype, in the order of the kernel and of cuda_launch.cc.
_AOT_ARGS = (
    ("X", "*"), ("W", "*"), ("B", "*"), ("WL", "*"), ("LB", "*"), ("Y", "*"),
    ("rows", "i32"), ("cols", "i32"), ("out_features", "i32"), ("stride_x", "i64"),
    ("eps", "fp32"), ("norm", "i32"), ("activation", "i32"), ("out_activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_linear_bias", "i32"),
)  # fmt: skip
AOT_KERNEL = KernelSpec(
    "NormActLinear", norm_act_linear_kernel, _AOT_ARGS,
    ("X", "W", "B", "WL", "cols", "stride_x"), norm_act_linear_tiers,
)  # fmt: skip
