"""NormActLinear's launch tiers (graphopt.kernels.launch_rules): the block shapes its kernel is
compiled in, measured, and the rule's view of them for a launch."""

from __future__ import annotations

import dataclasses

from graphopt.kernels.launch_rules import ELEMENT_BYTES, LaunchConfig, Tier, configure, row_tiers

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
# (block_m, num_warps) by block_n of the shared-operand and blockwise variants where they differ from
# the shapes above (bench/probe_norm_act_linear_blocks.py, H100: N = 128 features of 512 or 1024 rows
# at D = 256, N = 32 at D = 1024, K = 1 and 4). Per-feature operands, blockwise: four rows on one warp
# at D = 256 took 0.66-0.97x the time of the shapes above with their per-row code, two (fp32) or four
# (16-bit) rows on one warp at 1024 0.61-0.95x. Shared 16-bit operands: one warp for four rows at 256
# 0.71-0.75x, for one row at 1024 0.80x. Shared fp32 operands at 1024: two rows on two warps took
# 0.83-0.92x the time of two rows on four through PyTorch and ONNX Runtime at D = 768 and 1024
# (bench/probe_norm_act_linear_early.py, which times other shapes with distinct inputs per launch; one
# row on one warp was as fast through PyTorch but 8% slower from the C++ launcher at 768). Other
# widths keep their shape.
_SHARED = {4: {1024: (2, 2)}, 2: {256: (4, 1), 1024: (1, 1)}}
_BLOCKWISE = {4: {256: (4, 1), 1024: (2, 1)}, 2: {256: (4, 1), 1024: (4, 1)}}

# Narrow rows of one output (the seed's Linear(D, 1), per-feature recommendation heads) are launched so
# briefly that K taken at run time shows: Triton's JIT folds a K of 1 (its specialization of integer
# arguments equal to 1), the ahead-of-time kernel did not. So each exact shared and blockwise tier up
# to this width is preceded by its twin for K = 1 with K compiled in, as the JIT compiles it. Through
# the C++ launcher on an H100 (bench/probe_per_feature_aot.py, N = 128 x 512 rows of 256, K = 1): the
# seed's launch 25.96 -> 25.82 us in fp32 and 16.90 -> 16.33 in bf16, per-feature operands 28.48 ->
# 28.12 and 20.68 -> 20.31 (the JIT: 27.42 and 18.84; the rest of that gap is the flags the JIT folds).
_ONE_OUTPUT_MAX_COLS = 1024


def _with_one_output_twins(tiers: tuple[Tier, ...]) -> tuple[Tier, ...]:
    def twins(tier: Tier) -> tuple[Tier, ...]:
        narrow = tier.exact and (tier.shared or tier.blockwise) and tier.block_n <= _ONE_OUTPUT_MAX_COLS
        return (dataclasses.replace(tier, out_features=1), tier) if narrow else (tier,)

    return tuple(t for tier in tiers for t in twins(tier))


# Widths of two powers of two read as a head and a tail tile (two_piece_block.py), shared operands only,
# (head, tail, block_m, num_warps), the same in every dtype. Through PyTorch on an H200 at 16384 rows
# (LayerNorm + GELU, K = 4, against the padded block in one run: bench/results/2026-11-28-h200e/
# nal_two_piece.json): 640 0.63-0.74 of its time, 768 0.71-0.76, 1280 0.52-0.58, 2560 0.63 (fp32) and
# 0.86-0.92 (16-bit). One warp short rows: a 256-column tail on two warps holds 4 values a thread.
_TWO_PIECE = ((512, 128, 2, 1), (512, 256, 2, 1), (1024, 256, 1, 1), (2048, 512, 1, 4))

# Rows of exactly a power-of-two width (the seed's D = 256, most hidden sizes) take the same shapes
# with no column mask in the statistics and the normalized tile (NormAct's exact tiers).
NORM_ACT_LINEAR_TIERS: dict[int, tuple[Tier, ...]] = {
    size: (
        *_with_one_output_twins(
            tuple(Tier(h + t, m, h, w, exact=True, shared=True, tail=t) for h, t, m, w in _TWO_PIECE)
        ),
        *_with_one_output_twins(
            row_tiers(
                _ROW_SHAPES[size],
                loop=_LOOP[size],
                aligned=True,
                exact=_ROW_SHAPES[size],
                shared=_SHARED[size],
                blockwise=_BLOCKWISE[size],
            )
        ),
        *row_tiers(_UNALIGNED_SHAPES, loop=(2048, 4), aligned=False),
    )
    for size in (4, 2)
}


def norm_act_linear_tiers(dtype: str) -> tuple[Tier, ...]:
    return NORM_ACT_LINEAR_TIERS[ELEMENT_BYTES[dtype]]


def norm_act_linear_config(
    rows: int, cols: int, dtype: str, aligned: bool = True, uniform: int = 1, out_features: int = 0
) -> LaunchConfig:
    """The launch of NormActLinear on ``rows`` rows of ``cols`` (= D) elements of ``dtype`` to
    ``out_features`` (= K) outputs; ``uniform``: the ``uniform_rows`` of scale, bias, weight and linear
    bias (0: each one for all rows)."""
    return configure(norm_act_linear_tiers(dtype), rows, cols, aligned, uniform, out_features)
