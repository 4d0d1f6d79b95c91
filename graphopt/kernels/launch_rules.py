"""How a row-wise kernel is launched: the tiers of block shapes and the rule that picks one.

The rule is data, not code, so that the ahead-of-time table (``graphopt.kernels.aot``) can carry
it to C++ verbatim: each kernel lists its tiers in order, and a launch takes the first tier whose
``min_cols`` and ``max_cols`` admit the row length (an ``exact`` tier: equals it), whose ``max_rows``
admits the row count, whose ``min_channel`` admits the channel length and whose alignment requirement
the arguments meet. Most tiers admit any row
count, so that rows only set the grid; a tier that admits only few rows serves a kernel whose launch
pays only where the rows alone cannot fill the GPU (GroupNormAct's split statistics). Python
launchers and the C++ launcher apply this same rule, so a shape runs the same variant whichever
runtime launches it (C++ also requires aligned addresses: see ``is_aligned``).

This module imports neither torch nor a GPU driver: the AOT build runs without either.
"""

from __future__ import annotations

import dataclasses
import math
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
    """One compiled block shape. ``looped`` walks each row in chunks of ``block_n`` elements;
    ``exact`` serves only rows of exactly ``block_n`` elements, which need no column mask (the
    common power-of-two widths; it saves 16-bit rows a select per element)."""

    max_cols: int  # largest row length this tier serves
    block_m: int  # rows per block
    block_n: int  # row elements per block (the whole row unless looped)
    num_warps: int
    looped: bool = False
    aligned: bool = True  # needs the alignment above
    iters: int = 1  # row blocks per program, each program striding by the grid size
    exact: bool = False  # rows of exactly block_n elements only
    min_cols: int = 1  # shortest row length this tier serves
    max_rows: int = 2**62  # most rows this tier serves
    max_chunks: int = 1  # most chunks a row is cut into, one program each (split kernels)
    # Serves only launches whose operands every row shares (all group counts 1): the variant takes
    # them as constants, so the per-row branches that Triton's JIT folds away at such calls are not
    # compiled into the ahead-of-time kernel either.
    shared: bool = False
    # Serves only launches whose every block of block_m rows reads one row of each operand (per-feature
    # operands whose features span a multiple of block_m rows): the per-row code is not compiled in.
    blockwise: bool = False
    # An exact tier for rows of block_n + tail elements, both powers of two, read as two unmasked
    # tiles (a head of block_n and a tail): no lane is padding, as in a block of the next power of two.
    tail: int = 0
    # Serves only launches of exactly this many outputs (NormActLinear's K), compiled in as a constant
    # (Triton's JIT folds a K of 1 by itself; an ahead-of-time kernel only where told); 0: any count,
    # taken at run time.
    out_features: int = 0
    # Serves only launches whose rows are made of channels of at least this many elements (GroupNormAct:
    # ``spatial``, the elements one scale and shift serve); 0: any. A kernel whose channels each span a
    # block or more reads and normalizes a different way, and pays at other row counts.
    min_channel: int = 0

    @property
    def name(self) -> str:
        kind = "loop" if self.looped else "exact" if self.exact else "row"
        iters = f"_i{self.iters}" if self.iters > 1 else ""
        split = f"_c{self.max_chunks}" if self.max_chunks > 1 else ""
        bounds = (f"_from{self.min_cols}" if self.min_cols > 1 else "") + (
            f"_upto{self.max_rows}r" if self.max_rows < 2**62 else ""
        )
        tail = f"+{self.tail}" if self.tail else ""
        outputs = f"_k{self.out_features}" if self.out_features else ""
        channel = f"_ch{self.min_channel}" if self.min_channel else ""
        return (
            f"m{self.block_m}_n{self.block_n}{tail}_w{self.num_warps}{iters}{split}_{kind}{bounds}_"
            f"{'a' if self.aligned else 'u'}{'_s' if self.shared else ''}{'_b' if self.blockwise else ''}"
            f"{outputs}{channel}"
        )

    def admits(
        self, rows: int, cols: int, aligned: bool, uniform: int = 1, out_features: int = 0, channel: int = 0
    ) -> bool:
        """Whether a launch of ``rows`` rows of ``cols`` elements may take this tier (the rule the C++
        launcher's ``Select`` applies to the same fields); ``uniform``: the launch's ``uniform_rows``;
        ``out_features``: its output count where the kernel has one (0: none); ``channel``: its channel
        length where the kernel has channels (0: none)."""
        fits = cols == self.max_cols if self.exact else self.min_cols <= cols <= self.max_cols
        shared_ok = uniform == 0 or not self.shared
        operands_ok = shared_ok and (uniform % self.block_m == 0 or not self.blockwise)
        outputs_ok = self.out_features in (0, out_features)
        bounds_ok = rows <= self.max_rows and channel >= self.min_channel
        return fits and bounds_ok and (aligned or not self.aligned) and operands_ok and outputs_ok

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


def uniform_rows(*operand_rows: tuple[int, int]) -> int:
    """How many rows, in aligned runs, read the same row of every operand that broadcasts over X's
    rows as ``(inner, groups)`` (``graphopt.fused.broadcast_rows``: row r reads ``(r // inner) % groups``):
    0 when every row reads the same ones, else the greatest common divisor of the grouped operands'
    ``inner``. A block of block_m rows starting at a multiple of block_m reads one row of each operand
    exactly when block_m divides it (0 is divided by every block_m)."""
    run = 0
    for inner, groups in operand_rows:
        if groups != 1:
            run = math.gcd(run, inner)
    return run


def find_tier(
    tiers: tuple[Tier, ...],
    cols: int,
    aligned: bool,
    rows: int = 0,
    uniform: int = 1,
    out_features: int = 0,
    channel: int = 0,
) -> Tier | None:
    """The first of ``tiers`` that admits the launch, or None."""
    return next((t for t in tiers if t.admits(rows, cols, aligned, uniform, out_features, channel)), None)


def pick_tier(
    tiers: tuple[Tier, ...], cols: int, aligned: bool, rows: int = 0, uniform: int = 1, out_features: int = 0
) -> Tier:
    tier = find_tier(tiers, cols, aligned, rows, uniform, out_features)
    if tier is None:
        raise ValueError(f"no launch tier for {rows} rows of {cols} elements (aligned={aligned})")
    return tier


def configure(
    tiers: tuple[Tier, ...], rows: int, cols: int, aligned: bool, uniform: int = 1, out_features: int = 0
) -> LaunchConfig:
    if rows < 0 or cols <= 0:
        raise ValueError(f"bad shape: rows={rows}, cols={cols}")
    tier = pick_tier(tiers, cols, aligned, rows, uniform, out_features)
    return LaunchConfig(tier, (cdiv(rows, tier.rows_per_program), 1, 1))


def row_tiers(
    shapes: tuple[tuple[int, ...], ...],
    loop: tuple[int, int],
    aligned: bool,
    exact: tuple[tuple[int, ...], ...] = (),
    shared: dict[int, tuple[int, int]] | None = None,
    blockwise: dict[int, tuple[int, int]] | None = None,
) -> tuple[Tier, ...]:
    """Single-block tiers from (block_n, block_m, num_warps[, iters]), each preceded by the exact
    tier of its block_n in ``exact`` (same form) if there is one, then a looped tier for longer rows.
    With ``shared``, every tier is preceded by its copy for launches whose operands all rows share, and
    with ``blockwise`` by its blockwise copy (shared first). Each dict gives its copies' (block_m,
    num_warps) by block_n, the tier's own where absent: a launch that reads one operand row per block
    may take more rows per program than one whose every row may read its own."""

    def tier(shape: tuple[int, ...], is_exact: bool) -> Tier:
        n, m, w, *rest = shape
        return Tier(n, m, n, w, aligned=aligned, iters=(rest[0] if rest else 1), exact=is_exact)

    exact_by_n = {shape[0]: shape for shape in exact}
    single = []
    for shape in shapes:
        if shape[0] in exact_by_n:
            single.append(tier(exact_by_n.pop(shape[0]), True))
        single.append(tier(shape, False))
    if exact_by_n:
        raise ValueError(f"exact tiers without a general tier of the same width: {sorted(exact_by_n)}")
    chunk, warps = loop
    tiers = (*single, Tier(2**62, 1, chunk, warps, looped=True, aligned=aligned))

    def copy(tier: Tier, shapes: dict[int, tuple[int, int]], **kind: bool) -> Tier:
        m, w = (
            (tier.block_m, tier.num_warps)
            if tier.looped
            else shapes.get(tier.block_n, (tier.block_m, tier.num_warps))
        )
        return dataclasses.replace(tier, block_m=m, num_warps=w, **kind)

    def copies(tier: Tier) -> tuple[Tier, ...]:
        out = (copy(tier, shared, shared=True),) if shared is not None else ()
        out += (copy(tier, blockwise, blockwise=True),) if blockwise is not None else ()
        return (*out, tier)

    return tuple(t for tier in tiers for t in copies(tier))


def unwritten_output(written, wrap):
    """The pointer to pass for an output a launch does not write (a flag tells the kernel so).

    Eager launches pass ``written``, another output of the launch: it costs nothing, and a launch plan
    (``graphopt.fused.torch_launch_plans``) sees only the call's own tensors. Traced launches (``wrap``
    is ``torch.library.wrap_triton``) get a fresh one-element tensor: torch.compile copies apart two
    outputs that alias, and would write the unwritten copy back over ``written``."""
    import torch  # (here, not at the top: the ahead-of-time build imports this module without torch)

    return written.new_empty(1) if wrap is torch.library.wrap_triton else written
