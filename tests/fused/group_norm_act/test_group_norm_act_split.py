"""GroupNormAct's split launch (statistics per chunk, then the merge and normalization) against the
float64 reference under Triton's interpreter: the launch rule's choice of path and its chunks, the
partial statistics themselves, the real split tiers on each storage type with and without a
residual, and small split tiers (many chunks of several blocks, a short last chunk, fewer chunks
than the apply kernel's vector holds) on adversarial inputs: a large common offset, values near the
storage type's maximum, NaN and infinity, constant groups."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from group_norm_checks import random, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
from kernel_checks import assert_matches, f64, generator

from graphopt.fused.group_norm_act import launch_rule
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.fused.spec import Activation
from graphopt.kernels.launch_rules import Tier

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Blocks of 64 elements, at most 4 chunks a run: runs of a few hundred elements take several blocks
# per chunk and a short last chunk, which the real tiers reach only on runs of millions.
SMALL = Tier(2**62, 1, 64, 2, looped=True, aligned=False, min_cols=128, max_rows=255, max_chunks=4)


@pytest.fixture
def small_split(monkeypatch):
    monkeypatch.setattr(launch_rule, "split_tiers", lambda dtype: (SMALL,))


@pytest.mark.parametrize(
    ("shape", "groups", "split"),
    [
        ((2, 320, 64, 64), 32, True),  # SD UNet levels at batch 2: 64 runs of 40960
        ((2, 1280, 16, 16), 32, True),
        ((1, 256, 256, 256), 32, True),  # a VAE decoder: 32 runs of 524288
        ((8, 128, 32, 32), 32, False),  # 256 runs of 4096: enough programs as they are
        ((8, 640, 32, 32), 32, False),  # 256 runs of 20480 in channels of 1024
        ((2, 64, 16, 16), 8, False),  # runs of 2048: one block each
        ((2, 32, 16, 16), 32, False),
    ],
)
def test_the_rule_splits_few_long_runs(shape, groups, split):
    spatial = int(np.prod(shape[2:]))
    rows, group_size = shape[0] * groups, shape[1] // groups * spatial
    for dtype in ("float32", "float16", "bfloat16"):
        assert (
            launch_rule.split_launch(rows, group_size, spatial, dtype, group_size % 16 == 0) is not None
        ) == split


@pytest.mark.parametrize(
    ("shape", "groups", "split_16_bit"),
    [
        ((8, 256, 32, 32), 32, True),  # 256 runs of 8192: one padded 16384-lane block each, whole
        ((16, 128, 64, 64), 32, True),  # 512 runs of 16384
        ((64, 64, 32, 32), 32, False),  # runs of 2048: one block each
        ((8, 640, 32, 32), 32, False),  # runs of 20480 in channels of 1024
    ],
)
def test_16_bit_runs_of_one_to_two_blocks_split_at_any_row_count(shape, groups, split_16_bit):
    spatial = int(np.prod(shape[2:]))
    rows, group_size = shape[0] * groups, shape[1] // groups * spatial
    for dtype in ("float16", "bfloat16"):
        assert (launch_rule.split_launch(rows, group_size, spatial, dtype, True) is not None) == split_16_bit
    assert (
        launch_rule.split_launch(rows, group_size, spatial, "float32", True) is None
    )  # (fp32: whole is faster)


@pytest.mark.parametrize(
    ("shape", "groups", "split_16_bit", "split_32_bit"),
    [
        ((8, 320, 64, 64), 32, True, True),  # 256 runs of 40960 in channels of 4096 (SD UNet at batch 8)
        ((32, 320, 64, 64), 32, True, True),  # 1024 runs
        ((16, 64, 128, 128), 32, True, True),  # 512 runs of 32768 in channels of 16384
        ((8, 320, 4095), 32, False, False),  # channels of one element less than a block
        ((8, 640, 32, 32), 32, False, False),  # channels of 1024
        ((16, 128, 64, 64), 32, True, False),  # runs of 16384: fp32 gains nothing from the split
    ],
)
def test_long_runs_of_long_channels_split_at_any_row_count(shape, groups, split_16_bit, split_32_bit):
    spatial = int(np.prod(shape[2:]))
    rows, group_size = shape[0] * groups, shape[1] // groups * spatial
    for dtype, split in (("float16", split_16_bit), ("bfloat16", split_16_bit), ("float32", split_32_bit)):
        launch = launch_rule.split_launch(rows, group_size, spatial, dtype, group_size % 16 == 0)
        assert (launch is not None) == split, dtype
        if split:
            assert launch_rule.long_channels(spatial, launch.tier), dtype


@pytest.mark.parametrize("group_size", [8192, 8193, 10240, 40960, 65535, 262144, 262145, 524288, 1 << 24])
def test_chunks_cover_each_run_in_whole_blocks(group_size):
    for dtype in ("float32", "bfloat16"):
        split = launch_rule.split_launch(2, group_size, 1, dtype, False)
        tier = split.tier
        assert split.chunk % tier.block_n == 0 and split.chunks <= tier.max_chunks
        assert (split.chunks - 1) * split.chunk < group_size <= split.chunks * split.chunk
        # as few blocks per chunk as the chunk limit allows
        assert split.chunk == tier.block_n or -(-group_size // (split.chunk - tier.block_n)) > tier.max_chunks


@pytest.mark.parametrize("residual", [False, True])
def test_partials_are_each_chunks_pivot_and_statistics_around_it(residual, small_split):
    shape, groups = (2, 4, 250), 2
    gen = generator("partials", residual)
    x, r = random(shape, torch.float32, gen, mean=5.0), random(shape, torch.float32, gen)
    kept = []

    def scratch(numel):
        kept.append(torch.full((numel,), float("nan"), device=x.device))
        return kept[-1]

    y = torch.empty_like(x)
    launch_group_norm_act(
        x, None, None, r if residual else None, y, None, groups=groups, activation=0, eps=1e-5,
        scratch=scratch,
    )  # fmt: skip
    split = launch_rule.chunking(SMALL, 500)
    assert (split.chunk, split.chunks) == (128, 4)
    partials = kept[0].cpu()
    assert len(kept) == 1
    assert partials.numel() == 3 * 4 * split.chunks
    runs = f64((x + r) if residual else x).reshape(4, 500)
    for row, run_values in enumerate(runs):
        for c in range(split.chunks):
            part = run_values[c * split.chunk : (c + 1) * split.chunk]
            at = 3 * (row * split.chunks + c)
            pivot, mean, m2 = partials[at : at + 3].double()
            first_block = part[: SMALL.block_n]
            np.testing.assert_allclose(pivot, first_block.mean(), rtol=1e-6)
            exact = [part.mean() - pivot.item(), ((part - part.mean()) ** 2).sum()]
            np.testing.assert_allclose([mean, m2], exact, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("residual", [False, True])
def test_real_split_tiers(dtype, residual):
    tier = run((2, 8, 64, 64), 2, dtype, Activation.SILU, residual=residual)  # 4 runs of 16384
    assert tier.max_chunks > 1 and tier.aligned


def test_real_split_tiers_on_runs_of_no_multiple_of_16():
    tier = run((1, 3, 97, 89), 1, torch.float16, Activation.GELU, residual=True)  # one run of 25899
    assert tier.max_chunks > 1 and not tier.aligned


def test_residual_without_its_sum():
    gen = generator("split, no sum")
    shape = (2, 8, 64, 64)
    x, r = random(shape, torch.float32, gen), random(shape, torch.float32, gen)
    y = torch.empty_like(x)
    tier = launch_group_norm_act(
        x, None, None, r, y, None, groups=2, activation=int(Activation.TANH), eps=1e-5
    )
    assert tier.max_chunks > 1
    ref, _ = GROUP_NORM_ACT.reference(f64(x), residual=f64(r), groups=2, activation="tanh", epsilon=1e-5)
    assert_matches(y, ref, torch.float32, "split GroupNormAct without ResidualSum")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(
    ("shape", "groups"), [((2, 4, 250), 2), ((2, 2, 130), 1), ((3, 6, 7, 11), 3), ((2, 8, 5, 7), 2)]
)
def test_many_chunks_of_several_blocks(shape, groups, dtype, residual, small_split):
    tier = run(shape, groups, dtype, Activation.GELU, residual=residual)
    assert tier == SMALL
    # (channels of 250, 130 and 77 elements hold a block of 64: the apply kernel's long_channels
    # variant, its blocks crossing channel boundaries; channels of 35 take the per-element lookup)
    spatial = int(np.prod(shape[2:]))
    assert launch_rule.long_channels(spatial, tier) == (spatial >= 64)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("small", [True, False])
def test_large_common_offset_keeps_full_precision(residual, small, monkeypatch):
    # 1000 + 0.1 * noise, scaled by about 100: statistics not taken around a shift lose the noise's low
    # bits; the merge of chunks around one shift keeps fp32's usual tolerance.
    if small:
        monkeypatch.setattr(launch_rule, "split_tiers", lambda dtype: (SMALL,))
    shape = (2, 4, 250) if small else (2, 8, 64, 64)
    tier = run(shape, 2, torch.float32, Activation.IDENTITY, residual=residual, mean=1000.0, std=0.1,
               scale_mean=100.0, scale_std=50.0)  # fmt: skip
    assert tier.max_chunks > 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_values_near_the_storage_maximum(dtype, small_split):
    # fp16 values near 65504 (squares far past fp16's range); fp32 and bf16 values of 5e17, whose
    # squares summed over a run of 500 (1.25e38) come near fp32's 3.4e38, as do the merged partials.
    std = torch.finfo(dtype).max / 8 if dtype == torch.float16 else 5e17
    run((2, 4, 250), 2, dtype, Activation.TANH, std=std)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_residual_sum_overflowing_in_the_storage_type_poisons_its_group_only(dtype, small_split):
    top = torch.finfo(dtype).max
    gen = generator("split overflow", dtype)
    x, r = random((2, 4, 250), dtype, gen), random((2, 4, 250), dtype, gen)
    x[0, 1, 100], r[0, 1, 100] = top, top  # the first run's second chunk
    y, s = torch.empty_like(x), torch.empty_like(x)
    launch_group_norm_act(x, None, None, r, y, s, groups=2, activation=int(Activation.SILU), eps=1e-5)
    stored = (x.float() + r.float()).to(dtype)
    assert torch.equal(torch.isinf(s), torch.isinf(stored)) and torch.isinf(s[0, 1, 100])
    assert torch.isnan(y[0, :2]).all()
    ref, _ = GROUP_NORM_ACT.reference(f64(stored), groups=2, activation="silu", epsilon=1e-5)
    assert_matches(y[0, 2:], ref[0, 2:], dtype, "split GroupNormAct beside an overflowing group")
    assert_matches(y[1], ref[1], dtype, "split GroupNormAct after an overflowing group")


def test_nan_and_inf_stay_in_their_group(small_split):
    x = random((2, 4, 250), torch.float32, generator("split nan"))
    x[0, 1, 200], x[1, 3, 249] = float("nan"), float("inf")  # a middle chunk; the very last element
    y = torch.empty_like(x)
    launch_group_norm_act(x, None, None, None, y, None, groups=2, activation=int(Activation.SILU), eps=1e-5)
    assert torch.isnan(y[0, :2]).all() and torch.isnan(y[1, 2:]).all()
    ref, _ = GROUP_NORM_ACT.reference(f64(x), groups=2, activation="silu", epsilon=1e-5)
    for sample, channels in ((0, slice(2, 4)), (1, slice(0, 2))):
        assert_matches(
            y[sample, channels], ref[sample, channels], torch.float32, "split GroupNormAct beside NaN"
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["small split", "split", "whole"])
def test_constant_groups_give_the_activated_bias(dtype, path, monkeypatch):
    tiers = {"small split": (SMALL,), "whole": ()}
    if path in tiers:
        monkeypatch.setattr(launch_rule, "split_tiers", lambda dtype: tiers[path])
    shape = (2, 4, 250) if path == "small split" else (2, 8, 64, 64)
    x = random(shape, torch.float32, generator("constant", dtype, path))
    x[0, : shape[1] // 2] = 1000.0  # the first run constant (a large value: its square is no concern)
    x[1, shape[1] // 2 :] = -3.0
    tier = run(shape, 2, dtype, Activation.SILU, x=x)
    assert (tier.max_chunks > 1) == (path != "whole")
