"""How GroupNormAct is launched: its tiers, as data the ahead-of-time table carries to the C++
launcher (graphopt/kernels/launch_rules.py), so that every runtime launches a shape alike.

A "row" is one (sample, group): the contiguous run of ``group_size`` = C / groups * S elements;
there are N * groups rows. Two ways to launch them:

* **whole**: one program per row (``triton_kernel.group_norm_act_kernel``). A run that fits one
  block is read once; a longer one is walked twice, the second read mostly from L2.
* **split**: each run cut into ``chunks`` chunks of ``chunk`` elements, one program per chunk, in two
  kernels (``split_kernels``): ``stats`` writes each chunk's partial statistics to a float32
  scratch buffer (``PARTIAL_FLOATS`` per chunk), ``apply`` merges its row's partials and normalizes
  its chunk. N * groups programs (64 at batch 2 with 32 groups) cannot fill a GPU of 132 SMs; the
  split gives it hundreds to thousands, at the price of a second launch and a second read of X.

A launch splits where a split tier admits (rows, group_size, spatial): the split tiers' ``min_cols``
(runs long enough to share out), ``max_rows`` (too few rows to fill the GPU alone), ``max_cols`` (16-bit
runs the whole kernel holds in one padded block) and ``min_channel`` (channels of a block or more, which
the split reads faster at any row count) are the rule. Both
split kernels have the same tiers, so the C++ launcher finds the ``apply`` variant of the ``stats``
tier it picked. This module imports neither torch nor Triton.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.kernels.launch_rules import ELEMENT_BYTES, Tier, cdiv, find_tier, pick_tier

# The whole kernel: a row is one run, one run per program; about 16 values per thread in the
# one-block tiers; runs past the last one are looped in blocks of 4096. Each shape twice: aligned (16-byte
# vector loads and stores), for a group_size that is a multiple of 16 (every run then starts aligned, as
# Triton's JIT finds by itself), then for any other. The ahead-of-time library had only the unaligned
# ones, so its 16-bit kernels loaded one element at a time: on an H200, 8x320x64x64 fp16 with a residual
# took 63.5 us through the library against 43.1 through the JIT
# (bench/results/2026-11-28-h200/group_norm_long_channels/native_after and jit_after); with the aligned
# variants, on an H100, 54.5 against 51.9 (bench/results/2026-11-28-h100b/group_norm_aligned_whole).
_WHOLE_SHAPES = {4: ((1024, 4), (4096, 8), (8192, 16)), 2: ((1024, 2), (4096, 8), (16384, 16))}
_LOOP_SHAPE = (4096, 8)


def _whole_tiers(element_bytes: int) -> tuple[Tier, ...]:
    one_block = tuple(
        Tier(block_n, 1, block_n, warps, aligned=aligned)
        for block_n, warps in _WHOLE_SHAPES[element_bytes]
        for aligned in (True, False)
    )
    block_n, warps = _LOOP_SHAPE
    looped = tuple(Tier(2**62, 1, block_n, warps, looped=True, aligned=aligned) for aligned in (True, False))
    return (*one_block, *looped)


# The split: fewer than 256 rows (under two per SM of a 132-SM GPU) of runs of 8192 elements or more.
# A chunk is whole blocks of block_n elements, at most max_chunks per run (the apply kernel merges
# that many partials in one vector). Aligned variants (16-byte vector loads) where group_size is a
# multiple of 16 and the pointers are aligned; every chunk then starts aligned too.
_SPLIT_ROWS, _SPLIT_COLS, _MAX_CHUNKS = 255, 8192, 64
_SPLIT_SHAPES = {4: (4096, 8), 2: (4096, 4)}  # element bytes -> (block_n, num_warps)
# 16-bit runs of 8192 to 16384 elements split at any row count: the whole kernel holds such a run in one
# block of 16384 lanes on 16 warps, and on an H200 it took 1.03-2.0x the split's time at 256-2048 rows,
# channels of 1024 and 4096 elements alike (8x256x32x32 in groups of 32, fp16: 13.3 against 8.8 us;
# bench/results/2026-11-28-h200c/group_norm_split).
_SPLIT_ANY_ROWS_COLS = {2: 16384}
# Longer runs split at any row count where every channel holds a block or more (the apply kernel's
# long_channels variant: channel-wide scale and shift), from these run lengths. On an H200 at channels of
# 4096 elements (gn_split_spatial4096*.md there), 256-2048 rows: 16-bit runs of 16384-65536 took 0.65-0.83
# of the whole kernel's time; fp32 runs of 40960-65536 0.78-0.92, of 16384 0.95-1.04 (no gain: they stay
# whole). On channels of 1024 elements the split lost by up to 4% (gn_split_spatial1024.md).
_SPLIT_LONG_CHANNEL_COLS = {2: _SPLIT_COLS, 4: 32768}

PARTIAL_FLOATS = 3  # per chunk: its pivot, the mean of its elements minus the pivot, and their M2


def _split_tiers(element_bytes: int) -> tuple[Tier, ...]:
    block_n, warps = _SPLIT_SHAPES[element_bytes]
    # (min_cols, max_cols, max_rows, min_channel), in rule order
    bounds = [
        (_SPLIT_LONG_CHANNEL_COLS[element_bytes], 2**62, 2**62, block_n),
        (_SPLIT_COLS, 2**62, _SPLIT_ROWS, 0),
    ]
    if element_bytes in _SPLIT_ANY_ROWS_COLS:
        bounds.insert(0, (_SPLIT_COLS, _SPLIT_ANY_ROWS_COLS[element_bytes], 2**62, 0))
    return tuple(
        Tier(max_cols, 1, block_n, warps, looped=True, aligned=aligned, min_cols=min_cols,
             max_rows=max_rows, max_chunks=_MAX_CHUNKS, min_channel=min_channel)
        for min_cols, max_cols, max_rows, min_channel in bounds
        for aligned in (True, False)
    )  # fmt: skip


def whole_tiers(dtype: str) -> tuple[Tier, ...]:
    """The whole kernel's tiers for ``dtype``, in rule order."""
    return _whole_tiers(ELEMENT_BYTES[dtype])


def split_tiers(dtype: str) -> tuple[Tier, ...]:
    """The tiers of both split kernels for ``dtype``, in rule order."""
    return _split_tiers(ELEMENT_BYTES[dtype])


def whole_tier(group_size: int, dtype: str, aligned: bool) -> Tier:
    """The first whole-kernel tier that holds a run of ``group_size`` elements of ``dtype``;
    ``aligned``: group_size is a multiple of 16 (and, in C++, every pointer is aligned)."""
    return pick_tier(whole_tiers(dtype), group_size, aligned)


@dataclass(frozen=True)
class Split:
    """A split launch: ``chunks`` programs per row, each over ``chunk`` elements (the last one of a
    run over what is left)."""

    tier: Tier
    chunk: int
    chunks: int

    def programs(self, rows: int) -> int:
        return rows * self.chunks

    def partial_floats(self, rows: int) -> int:
        return PARTIAL_FLOATS * self.programs(rows)


def chunking(tier: Tier, group_size: int) -> Split:
    """Cuts a run into chunks of whole blocks, as few blocks per chunk as keep the chunks within
    ``tier.max_chunks`` (the C++ launcher computes the same: cuda_launch.cc)."""
    blocks = cdiv(group_size, tier.block_n)
    chunk = cdiv(blocks, tier.max_chunks) * tier.block_n
    return Split(tier, chunk, cdiv(group_size, chunk))


def long_channels(spatial: int, tier: Tier) -> bool:
    """Whether a split launch of ``tier`` takes the apply kernel's ``long_channels`` variant: every
    channel holds at least a block (``spatial`` >= block_n), so a block spans at most two channels and
    is scaled and shifted by channel-wide scalars (kernel_parts.finish_run_block; cuda_launch.cc
    alike).

    The whole kernel has no such variant. Its looped tier (the one that serves such channels, bar
    one-channel groups of exactly a block) took 16-21% longer with it as the ahead-of-time build
    compiles it, on an H200 at 8x320x64x64, fp32 and fp16 (169-182 registers a thread against
    86-108), though Triton 3.6's JIT ran it 3-21% faster on an H100 (bench/results/README.md,
    "2026-11-28, second session")."""
    return spatial >= tier.block_n


def split_launch(rows: int, group_size: int, spatial: int, dtype: str, aligned: bool) -> Split | None:
    """The split launch of ``rows`` runs of ``group_size`` elements in channels of ``spatial``, or None
    where the whole kernel runs them. ``aligned``: group_size is a multiple of 16 (and, in C++, every
    pointer is aligned)."""
    tier = find_tier(split_tiers(dtype), group_size, aligned, rows, channel=spatial)
    return None if tier is None else chunking(tier, group_size)
