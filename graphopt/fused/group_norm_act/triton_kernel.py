"""The GroupNormAct Triton kernels' launcher, the whole kernel (one program per (sample, group)), and
the ahead-of-time table's list of all three kernels.

X (and Residual) are contiguous [N, C, S] (S the product of the spatial dims), so the C / groups
channels of one (sample, group) are one contiguous run of ``group_size`` = C / groups * S elements.
The whole kernel takes the statistics of its run in float32 around a pivot, the run's plain mean
(the first block's on a looped run), by the corrected two-pass formulas of graphopt/kernels/row_norm.py
(a large common offset costs no precision, nor does an element far from the rest), then normalizes,
scales and shifts each element by its channel's Scale and Bias and applies the activation. A run
that fits one block is read once; a longer one is walked twice, the statistics merged block by block
with Chan's update (the second read mostly hits L2). With a Residual the sum is rounded to the
storage type, stored as ResidualSum, and normalized from there, as the unfused graph computes it.
Where the runs are too few to fill the GPU, the split kernels (split_kernels.py) run instead;
launch_rule.py holds the rule.

This module imports neither torch nor a GPU driver (the ahead-of-time build imports it).
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.fused.group_norm_act import launch_rule, split_kernels
from graphopt.fused.group_norm_act.kernel_parts import (
    chan_update,
    finish_block,
    load_sum,
    spatial_divider,
)
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import is_aligned, unwritten_output


@triton.jit
def group_norm_act_kernel(
    X, R, W, B, Y, S,
    groups, group_size, spatial,
    eps, activation, has_scale, has_bias, has_residual, write_sum,
    BLOCK_N: tl.constexpr, LOOPED: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)  # sample * groups + group
    base = pid * group_size
    channel0 = (pid % groups) * (group_size // spatial)
    offs = tl.arange(0, BLOCK_N)
    magic, shift_bits = spatial_divider(spatial)
    eps32 = tl.cast(eps, tl.float32)  # (Inductor passes a Python float as fp64)
    mask = offs < group_size
    x = load_sum(X, R, S, base + offs, mask, has_residual, write_sum)
    # The pivot: the plain mean of the run (of its first chunk when looped; masked-off lanes hold 0),
    # each value scaled before the sum so that values near the type's top do not overflow it.
    shift = tl.sum(x * (1.0 / tl.minimum(group_size, BLOCK_N).to(tl.float32)), axis=0)
    if not LOOPED:
        shifted = tl.where(mask, x - shift, 0.0)
        mean = tl.sum(shifted, axis=0) / group_size
        variance = tl.sum(shifted * shifted, axis=0) / group_size - mean * mean
        centered = tl.where(mask, shifted - mean, 0.0)
        rstd = tl.math.rsqrt(variance + eps32)
        finish_block(
            centered, rstd, offs, mask, channel0, spatial, magic, shift_bits, W, B, Y, base, activation,
            has_scale, has_bias,
        )  # fmt: skip
    else:
        zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
        mean, m2 = chan_update(tl.where(mask, x - shift, 0.0), 0, group_size, zero, zero, BLOCK_N)
        for start in range(BLOCK_N, group_size, BLOCK_N):
            mask = start + offs < group_size
            x = load_sum(X, R, S, base + start + offs, mask, has_residual, write_sum)
            mean, m2 = chan_update(tl.where(mask, x - shift, 0.0), start, group_size, mean, m2, BLOCK_N)
        rstd = tl.math.rsqrt(m2 / group_size + eps32)
        for start in range(0, group_size, BLOCK_N):
            idx = start + offs
            mask = idx < group_size
            x = load_sum(X, R, S, base + idx, mask, has_residual, 0)
            finish_block(
                (x - shift) - mean, rstd, idx, mask, channel0, spatial, magic, shift_bits, W, B, Y, base,
                activation, has_scale, has_bias,
            )  # fmt: skip


def _new_scratch(like):
    import torch  # (here: the ahead-of-time build imports this module without torch)

    return lambda numel: torch.empty(numel, dtype=torch.float32, device=like.device)


def launch_group_norm_act(
    x, scale, bias, residual, y, residual_sum, *, groups: int, activation: int, eps: float,
    wrap=lambda kernel: kernel, scratch=None,
):  # fmt: skip
    """Launches GroupNormAct on contiguous torch tensors of shape [N, C, *] (``y`` and
    ``residual_sum`` preallocated alike; ``residual_sum`` None: the sum is not stored); ``wrap`` may
    be ``torch.library.wrap_triton``. ``scratch(numel)`` gives the split launch its float32 buffer of
    partial statistics (by default a new tensor). Returns the tier launched."""
    n, channels = x.shape[0], x.shape[1]
    spatial = x[0, 0].numel()
    group_size = channels // groups * spatial
    rows, dtype = n * groups, str(x.dtype).removeprefix("torch.")
    has_residual = residual is not None
    write_sum = has_residual and residual_sum is not None
    r = residual if has_residual else x
    w, b = (scale if scale is not None else x), (bias if bias is not None else x)
    flags = (int(scale is not None), int(bias is not None), int(has_residual))
    s = residual_sum if write_sum else unwritten_output(y, wrap)
    aligned = is_aligned(group_size, ())
    split = launch_rule.split_launch(rows, group_size, spatial, dtype, aligned)
    if split is None:
        tier = launch_rule.whole_tier(group_size, dtype, aligned)
        wrap(group_norm_act_kernel)[(rows,)](
            x, r, w, b, y, s, groups, group_size, spatial, float(eps), int(activation), *flags,
            int(write_sum), BLOCK_N=tier.block_n, LOOPED=tier.looped, num_warps=tier.num_warps,
        )  # fmt: skip
        return tier
    tier, grid = split.tier, (split.programs(rows),)
    partials = (scratch or _new_scratch(x))(split.partial_floats(rows))
    wrap(split_kernels.group_norm_stats_kernel)[grid](
        x, r, s, partials, group_size, split.chunk, split.chunks, int(has_residual), int(write_sum),
        BLOCK_N=tier.block_n, num_warps=tier.num_warps,
    )  # fmt: skip
    wrap(split_kernels.group_norm_apply_kernel)[grid](
        x, r, w, b, y, residual_sum if write_sum else x, partials,
        groups, group_size, spatial, split.chunk, split.chunks, float(eps), int(activation), *flags,
        int(write_sum), BLOCK_N=tier.block_n, BLOCK_C=tier.max_chunks,
        TWO_CHANNEL=launch_rule.long_channels(spatial, tier), num_warps=tier.num_warps,
    )  # fmt: skip
    return tier


# Each kernel's arguments as the ahead-of-time build and the C++ launch (cuda_launch.cc) pass them.
_WHOLE_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"),
    ("groups", "i32"), ("group_size", "i32"), ("spatial", "i32"),
    ("eps", "fp32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"), ("write_sum", "i32"),
)  # fmt: skip
_STATS_ARGS = (
    ("X", "*"), ("R", "*"), ("S", "*"), ("P", "*fp32"),
    ("group_size", "i32"), ("chunk", "i32"), ("chunks", "i32"),
    ("has_residual", "i32"), ("write_sum", "i32"),
)  # fmt: skip
_APPLY_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"), ("P", "*fp32"),
    ("groups", "i32"), ("group_size", "i32"), ("spatial", "i32"), ("chunk", "i32"), ("chunks", "i32"),
    ("eps", "fp32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"), ("read_sum", "i32"),
)  # fmt: skip
# Aligned variants assume 16-byte aligned tensors and a group_size (so every run and chunk start) that
# is a multiple of 16: the C++ launch checks both (IsAligned). Scale and Bias are read per channel, not
# as vectors.
_ALIGNED = ("X", "R", "S", "Y", "P", "group_size", "chunk")
# The apply kernel twice: per-element channel lookup, and the ``long_channels`` part for launches whose
# channels each hold a whole block (launch_rule.long_channels), chosen by the launch as above
# (cuda_launch.cc alike).
LONG_CHANNELS = "long_channels"


def _apply(part: str, long_channels: bool) -> KernelSpec:
    return KernelSpec(
        "GroupNormAct", split_kernels.group_norm_apply_kernel, _APPLY_ARGS,
        tuple(a for a in _ALIGNED if a in dict(_APPLY_ARGS)), launch_rule.split_tiers, ("BLOCK_N", "BLOCK_C"),
        part, (("TWO_CHANNEL", long_channels),),
    )  # fmt: skip


AOT_KERNELS = (
    KernelSpec(
        "GroupNormAct", group_norm_act_kernel, _WHOLE_ARGS,
        tuple(a for a in _ALIGNED if a in dict(_WHOLE_ARGS)), launch_rule.whole_tiers, ("BLOCK_N", "LOOPED"),
    ),
    KernelSpec(
        "GroupNormAct", split_kernels.group_norm_stats_kernel, _STATS_ARGS,
        tuple(a for a in _ALIGNED if a in dict(_STATS_ARGS)), launch_rule.split_tiers, ("BLOCK_N",), "stats",
    ),
    _apply("apply", False),
    _apply("apply_" + LONG_CHANNELS, True),
)  # fmt: skip
