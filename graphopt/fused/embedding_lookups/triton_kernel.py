"""The EmbeddingLookups Triton kernel: each index of each feature mapped to its row of the concatenated
table, and the row copied.

The indices are seen as one flat run of ``rows`` = N x ``per_feature`` (feature k's at k x
``per_feature`` ...), the output as [rows, cols]. Each program takes ``BLOCK_M`` indices: it loads them
with their features' offsets and sizes, maps each to its row of the table (an index outside its own
feature's table finds none), and copies those rows in blocks of ``BLOCK_N`` columns (a loop of such
blocks for long rows), contiguous so loads and stores vectorize. A row that is found nowhere is
written as zeros (what ONNX Runtime's CUDA Gather writes for an out-of-range index), or, with ``trap``,
stops the kernel with a device-side trap (what torch's device-side assert does: the launch fails and
the CUDA context is lost).

One kernel serves PyTorch (JIT) and ONNX Runtime (compiled ahead of time, ``graphopt.kernels.aot``):
the index width (4 or 8 bytes), the negative-index rule and ``trap`` are runtime integers (uniform
branches), so the compiled variants differ only in the table's dtype and the block shape.
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import ELEMENT_BYTES, LaunchConfig, Tier, configure, is_aligned, row_tiers
from graphopt.kernels.ptx import INTERPRETED

if INTERPRETED:

    @triton.jit
    def trap_where(bad):
        # (the interpreter runs this as Python: a failed launch raises, as the trap fails it on a GPU)
        if bad.handle.data.any():
            raise IndexError("graphopt EmbeddingLookups: an index is out of range of its feature's table")

else:

    @triton.jit
    def trap_where(bad):
        # (not pure: the compiler must keep it though its result is unused)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $1, 0; @p trap; mov.u32 $0, 0; }",
            "=r,r", [bad.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip


@triton.jit
def _copy_rows(Table, Y, source, found, row, row_ok, col, cols):
    col_ok = col < cols
    values = tl.load(
        Table + source[:, None] * cols + col[None, :], mask=found[:, None] & col_ok[None, :], other=0.0
    )
    tl.store(Y + row[:, None] * cols + col[None, :], values, mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def embedding_lookups_kernel(
    Table, Ids, Offsets, Sizes, Y, rows, cols, table_rows, per_feature, index_bytes, wrap_negative, trap,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOPED: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = row < rows
    # (Ids is declared int64 for the ahead-of-time build; int32 indices are read through a cast pointer)
    if index_bytes == 4:
        index = tl.load(Ids.to(tl.pointer_type(tl.int32)) + row, mask=row_ok, other=0).to(tl.int64)
    else:
        index = tl.load(Ids.to(tl.pointer_type(tl.int64)) + row, mask=row_ok, other=0).to(tl.int64)
    feature = row // per_feature
    size = tl.load(Sizes + feature, mask=row_ok, other=0)
    first = tl.load(Offsets + feature, mask=row_ok, other=0)
    if wrap_negative:
        index = tl.where(index < 0, index + size, index)
    source = first + index
    # (the table bound guards against offsets and sizes that do not fit the table)
    found = row_ok & (index >= 0) & (index < size) & (source >= 0) & (source < table_rows)
    if trap:
        trap_where(row_ok & ~found)
    if LOOPED:
        for start in range(0, cols, BLOCK_N):
            _copy_rows(Table, Y, source, found, row, row_ok, start + tl.arange(0, BLOCK_N), cols)
    else:
        _copy_rows(Table, Y, source, found, row, row_ok, tl.arange(0, BLOCK_N), cols)


# (block_n, block_m, num_warps): about 2048 elements per program for 32-bit storage and 4096 for
# 16-bit (16 per thread at 4 warps: four 16-byte vectors), one tier per common embedding width (a
# wider block would leave lanes idle on every row); longer rows loop in blocks of the last width.
# Unaligned rows (a width not a multiple of 16) are rare: fewer tiers serve them.
_ALIGNED = {
    4: ((16, 128, 4), (32, 64, 4), (64, 32, 4), (128, 16, 4), (256, 8, 4), (512, 4, 4), (1024, 2, 4)),
    2: ((16, 256, 4), (32, 128, 4), (64, 64, 4), (128, 32, 4), (256, 16, 4), (512, 8, 4), (1024, 4, 4)),
}
_UNALIGNED = {
    4: ((16, 128, 4), (64, 32, 4), (256, 8, 4), (1024, 2, 4)),
    2: ((16, 256, 4), (64, 64, 4), (256, 16, 4), (1024, 4, 4)),
}
_LOOP = {4: (1024, 4), 2: (2048, 4)}

EMBEDDING_LOOKUPS_TIERS: dict[int, tuple[Tier, ...]] = {
    size: (
        *row_tiers(_ALIGNED[size], loop=_LOOP[size], aligned=True),
        *row_tiers(_UNALIGNED[size], loop=_LOOP[size], aligned=False),
    )
    for size in (4, 2)
}


def embedding_lookups_tiers(dtype: str) -> tuple[Tier, ...]:
    return EMBEDDING_LOOKUPS_TIERS[ELEMENT_BYTES[dtype]]


def embedding_lookups_config(rows: int, cols: int, dtype: str, aligned: bool = True) -> LaunchConfig:
    """The launch of EmbeddingLookups for ``rows`` indices of rows of ``cols`` elements of ``dtype``."""
    return configure(embedding_lookups_tiers(dtype), rows, cols, aligned)


def launch_embedding_lookups(
    table, indices, offsets, sizes, y2d, *, per_feature: int, wrap_negative: int, trap: bool,
    wrap=lambda kernel: kernel,
) -> LaunchConfig | None:  # fmt: skip
    """Launches EmbeddingLookups on torch tensors: ``table`` a contiguous [R, D], ``indices`` the
    contiguous flat int32 or int64 indices of N features, ``per_feature`` each, ``offsets`` and
    ``sizes`` contiguous int64 [N], ``y2d`` the contiguous [indices, D] output. ``wrap`` may be
    ``torch.library.wrap_triton``."""
    rows, cols = y2d.shape
    if rows == 0 or cols == 0:
        return None
    config = embedding_lookups_config(
        rows, cols, str(y2d.dtype).removeprefix("torch."), is_aligned(cols, (cols,))
    )
    tier = config.tier
    wrap(embedding_lookups_kernel)[config.grid](
        table, indices, offsets, sizes, y2d, rows, cols, table.shape[0], per_feature,
        indices.element_size(), int(wrap_negative), int(trap),
        BLOCK_M=tier.block_m, BLOCK_N=tier.block_n, LOOPED=tier.looped, num_warps=tier.num_warps,
    )  # fmt: skip
    return config


# (name, type) of every runtime argument, "*" a pointer to the storage dtype: the C++ launch's ABI
# (cuda_launch.cc passes them in this order).
_AOT_ARGS = (
    ("Table", "*"), ("Ids", "*i64"), ("Offsets", "*i64"), ("Sizes", "*i64"), ("Y", "*"), ("rows", "i32"),
    ("cols", "i32"), ("table_rows", "i64"), ("per_feature", "i32"), ("index_bytes", "i32"),
    ("wrap_negative", "i32"), ("trap", "i32"),
)  # fmt: skip

AOT_KERNEL = KernelSpec(
    "EmbeddingLookups", embedding_lookups_kernel, _AOT_ARGS, ("Table", "Y", "cols"), embedding_lookups_tiers
)
