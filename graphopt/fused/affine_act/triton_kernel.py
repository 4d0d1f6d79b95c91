"""The AffineAct Triton kernel: Y = act(X * Scale + Bias), pointwise, one channel per row or column.

X is seen as a contiguous [rows, cols] matrix. With the channel axis last (a linear layer's bias), the
channel of an element is its column: ``cols`` is the channel count. Otherwise (a batch norm over NCHW)
the dims after the channel axis are the columns and the channel of a row is ``row % channels``: one
scale and bias per row. Each program covers ``BLOCK_M`` rows, their columns in one block of
``BLOCK_N`` or, for long rows, in a loop of such blocks, contiguous so loads and stores vectorize.
Arithmetic is float32; Y takes X's dtype.

One kernel serves PyTorch (JIT) and ONNX Runtime (compiled ahead of time, ``graphopt.kernels.aot``):
which of Scale and Bias exist and where the channel is are runtime integers (uniform branches), so the
compiled variants differ only in dtype and block shape (``affine_act_tiers``), picked by the launch
rule of ``graphopt.kernels.launch_rules`` from the row length.
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import ELEMENT_BYTES, LaunchConfig, Tier, configure, is_aligned, row_tiers
from graphopt.kernels.ptx import widen
from graphopt.kernels.row_norm import masked_by


@triton.jit
def _affine_act_block(
    X,
    S,
    B,
    Y,
    row,
    row_ok,
    col,
    cols,
    channels,
    activation,
    has_scale,
    has_bias,
    per_row,
    storage: tl.constexpr,
):
    col_ok = col < cols
    mask = row_ok[:, None] & col_ok[None, :]
    offset = row[:, None] * cols + col[None, :]
    z = widen(tl.load(X + offset, mask=mask, other=0.0))
    # (each branch names its own vectors: a row's and a column's have different shapes)
    if per_row:
        channel = row % channels
        # (.to, not widen: widen's packed conversion needs an even count, and BLOCK_M may be 1)
        row_scale = tl.load(S + channel, mask=masked_by(row_ok, has_scale), other=1.0).to(tl.float32)
        row_bias = tl.load(B + channel, mask=masked_by(row_ok, has_bias), other=0.0).to(tl.float32)
        z = z * row_scale[:, None] + row_bias[:, None]
    else:
        col_scale = widen(tl.load(S + col, mask=masked_by(col_ok, has_scale), other=1.0))
        col_bias = widen(tl.load(B + col, mask=masked_by(col_ok, has_bias), other=0.0))
        z = z * col_scale[None, :] + col_bias[None, :]
    y = apply_activation(z, activation, storage)
    tl.store(Y + offset, y.to(storage), mask=mask)


@triton.jit
def affine_act_kernel(
    X, S, B, Y, rows, cols, channels, activation, has_scale, has_bias, per_row,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOPED: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = row < rows
    storage = Y.dtype.element_ty
    if LOOPED:
        for start in range(0, cols, BLOCK_N):
            col = start + tl.arange(0, BLOCK_N)
            _affine_act_block(
                X,
                S,
                B,
                Y,
                row,
                row_ok,
                col,
                cols,
                channels,
                activation,
                has_scale,
                has_bias,
                per_row,
                storage,
            )
    else:
        col = tl.arange(0, BLOCK_N)
        _affine_act_block(
            X, S, B, Y, row, row_ok, col, cols, channels, activation, has_scale, has_bias, per_row, storage
        )


# (block_n, block_m, num_warps): about 2048 elements per program for 32-bit storage and 4096 for
# 16-bit (16 per thread at 4 warps: four 16-byte vectors), from short rows (a batch norm's 7 x 7 maps)
# to a whole MLP row; longer rows loop in blocks of the last width.
_SHAPES = {
    4: ((16, 128, 4), (64, 32, 4), (256, 8, 4), (1024, 2, 4), (2048, 1, 4)),
    2: ((16, 256, 4), (64, 64, 4), (256, 16, 4), (1024, 4, 4), (4096, 1, 4)),
}
_LOOP = {4: (2048, 4), 2: (4096, 4)}

AFFINE_ACT_TIERS: dict[int, tuple[Tier, ...]] = {
    size: (
        *row_tiers(_SHAPES[size], loop=_LOOP[size], aligned=True),
        *row_tiers(_SHAPES[size], loop=_LOOP[size], aligned=False),
    )
    for size in (4, 2)
}


def affine_act_tiers(dtype: str) -> tuple[Tier, ...]:
    return AFFINE_ACT_TIERS[ELEMENT_BYTES[dtype]]


def affine_act_config(rows: int, cols: int, dtype: str, aligned: bool = True) -> LaunchConfig:
    """The launch of AffineAct on ``rows`` rows of ``cols`` elements of ``dtype`` ("float16", ...)."""
    return configure(affine_act_tiers(dtype), rows, cols, aligned)


def launch_affine_act(
    x2d, scale, bias, y2d, *, channels: int, per_row: bool, activation: int, wrap=lambda kernel: kernel
) -> LaunchConfig | None:
    """Launches AffineAct on contiguous [rows, cols] torch tensors ``x2d`` and ``y2d``; ``scale`` and
    ``bias`` are contiguous [channels] or None. ``wrap`` may be ``torch.library.wrap_triton``."""
    rows, cols = x2d.shape
    if rows == 0 or cols == 0:
        return None
    config = affine_act_config(rows, cols, str(x2d.dtype).removeprefix("torch."), is_aligned(cols, (cols,)))
    tier = config.tier
    wrap(affine_act_kernel)[config.grid](
        x2d, scale if scale is not None else x2d, bias if bias is not None else x2d, y2d,
        rows, cols, channels, int(activation),
        int(scale is not None), int(bias is not None), int(per_row),
        BLOCK_M=tier.block_m, BLOCK_N=tier.block_n, LOOPED=tier.looped, num_warps=tier.num_warps,
    )  # fmt: skip
    return config


# (name, type) of every runtime argument, "*" a pointer to the storage dtype: the C++ launch's ABI
# (cuda_launch.cc passes them in this order).
_AOT_ARGS = (
    ("X", "*"), ("S", "*"), ("B", "*"), ("Y", "*"), ("rows", "i32"), ("cols", "i32"), ("channels", "i32"),
    ("activation", "i32"), ("has_scale", "i32"), ("has_bias", "i32"), ("per_row", "i32"),
)  # fmt: skip

AOT_KERNEL = KernelSpec(
    "AffineAct", affine_act_kernel, _AOT_ARGS, ("X", "S", "B", "Y", "cols"), affine_act_tiers
)
