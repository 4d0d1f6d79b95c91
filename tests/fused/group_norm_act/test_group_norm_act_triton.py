"""The GroupNormAct Triton kernels against the float64 reference (under Triton's interpreter on a
CPU): every activation, each storage type, one-block and looped runs, residuals, large offsets,
values near the storage type's maximum, NaN and infinity. The split kernels on their own:
test_group_norm_act_split.py."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from group_norm_checks import random, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
from kernel_checks import assert_matches, assert_written, f64, generator, poisoned

from graphopt.fused.group_norm_act import launch_rule
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.fused.spec import Activation

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("act", list(Activation))
def test_every_activation(act):
    affine = int(act) % 2 == 0
    run((2, 8, 5, 3), 4, torch.float32, act, scale=affine, bias=affine)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("residual", [False, True])
def test_half_precision(dtype, residual):
    run((2, 16, 6, 6), 4, dtype, Activation.SILU, residual=residual)


@pytest.mark.parametrize(
    ("scale", "bias", "residual"), [(False, False, False), (True, False, True), (False, True, False)]
)
def test_optional_inputs(scale, bias, residual):
    run((3, 6, 7), 3, torch.float32, Activation.GELU, scale=scale, bias=bias, residual=residual)


@pytest.mark.parametrize("shape", [(2, 4), (1, 32, 1, 1), (2, 6, 2, 3, 4)])
def test_ranks_and_one_element_groups(shape):
    run(shape, 2, torch.float32, Activation.RELU)


@pytest.fixture
def whole_kernel_only(monkeypatch):
    """Runs every shape through the whole kernel (long runs would split: few rows of them here)."""
    monkeypatch.setattr(launch_rule, "split_tiers", lambda dtype: ())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("residual", [False, True])
def test_looped_runs(dtype, residual, whole_kernel_only):
    shape = (2, 4, 75, 61)  # runs of 2 * 4575 elements: past every one-block tier of fp32
    tier = run(shape, 2, dtype, Activation.SILU, residual=residual)
    assert tier.looped == (dtype == torch.float32) and tier.max_chunks == 1


@pytest.mark.parametrize("shape", [(3, 4, 9, 9), (2, 4, 75, 61)])
@pytest.mark.parametrize("residual", [False, True])
def test_large_common_offset_keeps_full_precision(shape, residual, whole_kernel_only):
    # 1000 + 0.1 * noise scaled by about 100: a plain fp32 sum of a run loses the noise's low bits
    # (the result off by 1e-1); shifted statistics keep the usual fp32 tolerance.
    run(shape, 2, torch.float32, Activation.IDENTITY, residual=residual, mean=1000.0, std=0.1,
        scale_mean=100.0, scale_std=50.0)  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_values_near_the_storage_maximum(dtype):
    # fp16 values near 65504 (their squares far past fp16's range) and fp32/bf16 values of 1e18 (squares
    # of 1e36, near fp32's 3.4e38): the statistics are fp32 and the outputs normalized, so nothing
    # overflows.
    std = torch.finfo(dtype).max / 8 if dtype == torch.float16 else 1e18
    run((2, 4, 16), 2, dtype, Activation.TANH, std=std)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_residual_sum_is_rounded_and_overflows_as_stored(dtype):
    top = torch.finfo(dtype).max
    gen = generator("overflow", dtype)
    x = random((2, 4, 8), dtype, gen)
    r = random((2, 4, 8), dtype, gen)
    x[0, 0, 0], r[0, 0, 0] = top, top  # the first group's sum overflows in the storage type
    y, s = torch.empty_like(x), torch.empty_like(x)
    launch_group_norm_act(x, None, None, r, y, s, groups=2, activation=int(Activation.SILU), eps=1e-5)
    stored = (x.float() + r.float()).to(dtype)
    # (Not bit for bit: Triton's interpreter rounds fp32 to bf16 unlike the GPU.)
    assert torch.equal(torch.isinf(s), torch.isinf(stored)) and torch.isinf(s[0, 0, 0])
    assert_matches(s[1:], f64(stored[1:]), dtype, f"GroupNormAct {dtype} ResidualSum")
    assert torch.isnan(y[0, :2]).all()  # the whole group is NaN, as the unfused graph's
    ref, _ = GROUP_NORM_ACT.reference(f64(stored[1:]), groups=2, activation="silu", epsilon=1e-5)
    assert_matches(y[1:], ref, dtype, f"GroupNormAct {dtype} after an overflowing group")


def test_nan_and_inf_stay_in_their_group():
    x = random((2, 4, 6), torch.float32, generator("nan"))
    x[0, 0, 3], x[1, 3, 0] = float("nan"), float("inf")
    y = torch.empty_like(x)
    launch_group_norm_act(x, None, None, None, y, None, groups=2, activation=int(Activation.SILU), eps=1e-5)
    assert torch.isnan(y[0, :2]).all() and torch.isnan(y[1, 2:]).all()
    ref, _ = GROUP_NORM_ACT.reference(f64(x), groups=2, activation="silu", epsilon=1e-5)
    clean = (slice(0, 1), slice(2, 4)), (slice(1, 2), slice(0, 2))
    for sample, channels in clean:
        assert_matches(y[sample, channels], ref[sample, channels], torch.float32, "GroupNormAct beside a NaN")


@pytest.mark.parametrize("shape", [(2, 4, 6), (2, 4, 75, 61)])
def test_residual_without_its_sum(shape, whole_kernel_only):
    gen = generator("no sum", shape)
    x, r = random(shape, torch.float32, gen), random(shape, torch.float32, gen)
    y, y_storage = poisoned(shape, torch.float32)
    launch_group_norm_act(x, None, None, r, y, None, groups=2, activation=int(Activation.GELU), eps=1e-5)
    assert_written(y_storage, int(np.prod(shape)), "GroupNormAct without ResidualSum")
    ref, _ = GROUP_NORM_ACT.reference(f64(x), residual=f64(r), groups=2, activation="gelu", epsilon=1e-5)
    assert_matches(y, ref, torch.float32, "GroupNormAct without ResidualSum")


def test_tier_rule():
    for dtype in ("float32", "float16", "bfloat16"):
        tiers = launch_rule.whole_tiers(dtype)
        one_block = [tier for tier in tiers if not tier.looped]
        for tier in one_block:
            assert launch_rule.whole_tier(tier.max_cols, dtype, tier.aligned) == tier
        longest = max(tier.max_cols for tier in one_block)
        for aligned in (True, False):
            # every shape has its aligned variant, taken only by aligned launches
            assert launch_rule.whole_tier(16, dtype, aligned).aligned == aligned
            looped = launch_rule.whole_tier(longest + 16, dtype, aligned)
            assert looped.looped and looped.aligned == aligned
