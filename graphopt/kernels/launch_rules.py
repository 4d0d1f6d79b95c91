"""How a row-wise kernel is launched: the tiers of block shapes and the rule that picks one.

The rule is data, not code, so that the ahead-of-time table (``graphopt.kernels.aot``) can carry
it to C++ verbatim: each kernel lists its tiers in order, and a launch takes the first tier whose
``max_cols`` admits the row length and whose alignment requirement the arguments meet. Rows only
set the grid. Python launchers and the C++ launcher apply this same rule, so a shape runs the same
variant whichever runtime launches it (C++ also requires aligned addresses: see ``is_aligned``).

This module imports neither torch nor a GPU driver: the AOT build runs without either.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float32", "float16", "bfloat16")
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}

# What an aligned variant assumes, matching what Triton's JIT specializes on: every pointer is
# ALIGN_BYTES-aligned and the row length and row strides are multiples of ALIGN_ELEMENTS. It lets
# the compiler use 16-byte vector loads and stores.
ALIGN_BYTES = 16
ALIGN_ELEMENTS = 16


@dataclass(frozen=True)
class Tier:
    """One compiled block shape. ``looped`` walks each row in chunks of ``block_n`` elements."""

    max_cols: int  # largest row length this tier serves
    block_m: int  # rows per block
    block_n: int  # row elements per block (the whole row unless looped)
    num_warps: int
    looped: bool = False
    aligned: bool = True  # needs the alignment above
    iters: int = 1  # row blocks per program, each program striding by the grid size

    @property
    def name(self) -> str:
        kind = "loop" if self.looped else "row"
        iters = f"_i{self.iters}" if self.iters > 1 else ""
        return (
            f"m{self.block_m}_n{self.block_n}_w{self.num_warps}{iters}_{kind}_{'a' if self.aligned else 'u'}"
        )

    @property
    def rows_per_program(self) -> int:
        return self.block_m * self.iters


@dataclass(frozen=True)
class LaunchConfig:
    tier: Tier
    grid: tuple[int, int, int]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def is_aligned(cols: int, row_strides: tuple[int, ...], addresses: tuple[int, ...] = ()) -> bool:
    """Whether arguments meet an aligned tier's assumptions (``addresses`` of the present pointers).

    The C++ launcher checks addresses too: its aligned variants were compiled assuming them. The
    Python launchers pass none: Triton's JIT specializes on the real pointers by itself, and under
    torch.compile the launch is traced with tensors that have no address."""
    return (
        cols % ALIGN_ELEMENTS == 0
        and all(s % ALIGN_ELEMENTS == 0 for s in row_strides)
        and all(a % ALIGN_BYTES == 0 for a in addresses)
    )


def pick_tier(tiers: tuple[Tier, ...], cols: int, aligned: bool) -> Tier:
    for tier in tiers:
        if cols <= tier.max_cols and (aligned or not tier.aligned):
            return tier
    raise ValueError(f"no launch tier for a row of {cols} elements (aligned={aligned})")


def configure(tiers: tuple[Tier, ...], rows: int, cols: int, aligned: bool) -> LaunchConfig:
    if rows < 0 or cols <= 0:
        raise ValueError(f"bad shape: rows={rows}, cols={cols}")
    tier = pick_tier(tiers, cols, aligned)
    return LaunchConfig(tier, (cdiv(rows, tier.rows_per_program), 1, 1))


def row_tiers(shapes: tuple[tuple[int, ...], ...], loop: tuple[int, int], aligned: bool) -> tuple[Tier, ...]:
    """Single-block tiers from (block_n, block_m, num_warps[, iters]), then a looped tier for
    longer rows."""
    single = tuple(
        Tier(n, m, n, w, aligned=aligned, iters=(rest[0] if rest else 1)) for n, m, w, *rest in shapes
    )
    chunk, warps = loop
    return (*single, Tier(2**62, 1, chunk, warps, looped=True, aligned=aligned))
