"""The GroupNormAct Triton kernel: one program per (sample, group).

X (and Residual) are contiguous [N, C, S] (S the product of the spatial dims), so the C / groups
channels of one (sample, group) are one contiguous run of ``group_size`` = C / groups * S elements.
A program takes the statistics of its run in float32 around a pivot, the run's plain mean (the first
chunk's on a looped run), by the corrected two-pass formulas of graphopt/kernels/row_norm.py (a
large common offset costs no precision, nor does an element far from the rest), then normalizes,
scales and shifts each element by its channel's Scale and Bias and applies the activation. A run
that fits one block is read once; a longer one is walked twice, the statistics merged chunk by chunk
with Chan's update (the second read mostly hits L2). With a Residual the sum is rounded to the
storage type, stored as ResidualSum, and normalized from there, as the unfused graph computes it.

This module imports neither torch nor a GPU driver (the ahead-of-time build imports it).
"""

from __future__ import annotations

import triton
import triton.language as tl

from graphopt.kernels.activations import apply_activation
from graphopt.kernels.kernel_spec import KernelSpec
from graphopt.kernels.launch_rules import ELEMENT_BYTES, Tier
from graphopt.kernels.ptx import widen
from graphopt.kernels.row_norm import masked_by


@triton.jit
def _load_sum(X, R, S, offs, mask, has_residual, write_sum):
    """A block of X (+ R, added in fp32 and rounded once to the storage type) as fp32."""
    x = tl.load(X + offs, mask=mask, other=0.0)
    if has_residual:
        r = tl.load(R + offs, mask=mask, other=0.0)
        x = (widen(x) + widen(r)).to(x.dtype)
        if write_sum:
            tl.store(S + offs, x, mask=mask)
    return widen(x)


@triton.jit
def _chunk_update(shifted, mask, start, group_size, mean, m2, BLOCK_N: tl.constexpr):
    """Folds the chunk at ``start`` of the shifted run into its running (mean, M2) by Chan's pairwise
    update: no cancellation of sum-of-squares formulas on long runs."""
    n = tl.minimum(group_size - start, BLOCK_N).to(tl.float32)
    chunk_mean = tl.sum(shifted, axis=0) / n
    centered = tl.where(mask, shifted - chunk_mean, 0.0)
    count = start * 1.0  # every earlier chunk was full
    total = count + n
    delta = chunk_mean - mean
    mean = mean + delta * (n / total)
    m2 = m2 + tl.sum(centered * centered, axis=0) + delta * delta * (count * n / total)
    return mean, m2


@triton.jit
def _finish(centered, rstd, idx, mask, channel0, spatial, W, B, Y, base, activation, has_scale, has_bias):
    channel = channel0 + idx // spatial
    scale = widen(tl.load(W + channel, mask=masked_by(mask, has_scale), other=1.0))
    bias = widen(tl.load(B + channel, mask=masked_by(mask, has_bias), other=0.0))
    y = apply_activation(centered * rstd * scale + bias, activation, Y.dtype.element_ty)
    tl.store(Y + base + idx, y.to(Y.dtype.element_ty), mask=mask)


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
    eps32 = tl.cast(eps, tl.float32)  # (Inductor passes a Python float as fp64)
    mask = offs < group_size
    x = _load_sum(X, R, S, base + offs, mask, has_residual, write_sum)
    # The pivot: the plain mean of the run (of its first chunk when looped; masked-off lanes hold 0).
    shift = tl.sum(x, axis=0) / tl.minimum(group_size, BLOCK_N).to(tl.float32)
    if not LOOPED:
        shifted = tl.where(mask, x - shift, 0.0)
        mean = tl.sum(shifted, axis=0) / group_size
        variance = tl.sum(shifted * shifted, axis=0) / group_size - mean * mean
        centered = tl.where(mask, shifted - mean, 0.0)
        rstd = tl.math.rsqrt(variance + eps32)
        _finish(centered, rstd, offs, mask, channel0, spatial, W, B, Y, base, activation, has_scale, has_bias)
    else:
        zero = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
        mean, m2 = _chunk_update(tl.where(mask, x - shift, 0.0), mask, 0, group_size, zero, zero, BLOCK_N)
        for start in range(BLOCK_N, group_size, BLOCK_N):
            idx = start + offs
            mask = idx < group_size
            x = _load_sum(X, R, S, base + idx, mask, has_residual, write_sum)
            shifted = tl.where(mask, x - shift, 0.0)
            mean, m2 = _chunk_update(shifted, mask, start, group_size, mean, m2, BLOCK_N)
        rstd = tl.math.rsqrt(m2 / group_size + eps32)
        for start in range(0, group_size, BLOCK_N):
            idx = start + offs
            mask = idx < group_size
            x = _load_sum(X, R, S, base + idx, mask, has_residual, 0)
            centered = (x - shift) - mean
            _finish(
                centered, rstd, idx, mask, channel0, spatial, W, B, Y, base, activation, has_scale, has_bias
            )


# Tiers in the row kernels' terms (graphopt/kernels/launch_rules.py), so the ahead-of-time build and
# the C++ launcher take them as they take NormAct's: a "row" is one (sample, group), ``max_cols`` the
# longest run a tier holds, one run per program. About 16 values per thread in the one-block tiers;
# runs past the last one are looped in chunks of 4096 (the second read of a run comes from L2). No
# aligned variants: a run starts at any multiple of its length.
_TIERS = {
    4: (Tier(1024, 1, 1024, 4, aligned=False), Tier(4096, 1, 4096, 8, aligned=False),
        Tier(8192, 1, 8192, 16, aligned=False)),
    2: (Tier(1024, 1, 1024, 2, aligned=False), Tier(4096, 1, 4096, 8, aligned=False),
        Tier(16384, 1, 16384, 16, aligned=False)),
}  # fmt: skip
_LOOP = Tier(2**62, 1, 4096, 8, looped=True, aligned=False)


def group_norm_act_tiers(dtype: str) -> tuple[Tier, ...]:
    return (*_TIERS[ELEMENT_BYTES[dtype]], _LOOP)


def group_norm_act_tier(group_size: int, dtype: str) -> Tier:
    """The first tier that holds a run of ``group_size`` elements of ``dtype``."""
    return next(t for t in group_norm_act_tiers(dtype) if group_size <= t.max_cols)


def launch_group_norm_act(
    x, scale, bias, residual, y, residual_sum, *, groups: int, activation: int, eps: float,
    wrap=lambda kernel: kernel,
):  # fmt: skip
    """Launches GroupNormAct on contiguous torch tensors of shape [N, C, *] (``y`` and
    ``residual_sum`` preallocated alike; ``residual_sum`` None: the sum is not stored);
    ``wrap`` may be ``torch.library.wrap_triton``."""
    n, channels = x.shape[0], x.shape[1]
    spatial = x[0, 0].numel()
    group_size = channels // groups * spatial
    tier = group_norm_act_tier(group_size, str(x.dtype).removeprefix("torch."))
    has_residual = residual is not None
    write_sum = has_residual and residual_sum is not None
    wrap(group_norm_act_kernel)[(n * groups,)](
        x, residual if has_residual else x, scale if scale is not None else x,
        bias if bias is not None else x, y,
        # Never ``y`` as the unused sum: traced by torch.compile, outputs that alias are copied apart.
        residual_sum if write_sum else y.new_empty(1),
        groups, group_size, spatial,
        float(eps), int(activation), int(scale is not None), int(bias is not None), int(has_residual),
        int(write_sum), BLOCK_N=tier.block_n, LOOPED=tier.looped, num_warps=tier.num_warps,
    )  # fmt: skip
    return tier


# The kernel's arguments as the ahead-of-time build and the C++ launch (cuda_launch.cc) pass them.
_AOT_ARGS = (
    ("X", "*"), ("R", "*"), ("W", "*"), ("B", "*"), ("Y", "*"), ("S", "*"),
    ("groups", "i32"), ("group_size", "i32"), ("spatial", "i32"),
    ("eps", "fp32"), ("activation", "i32"),
    ("has_scale", "i32"), ("has_bias", "i32"), ("has_residual", "i32"), ("write_sum", "i32"),
)  # fmt: skip
AOT_KERNEL = KernelSpec(
    "GroupNormAct", group_norm_act_kernel, _AOT_ARGS, (), group_norm_act_tiers, ("BLOCK_N", "LOOPED")
)
