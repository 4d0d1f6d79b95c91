"""NormActLinear's programs of several consecutive row blocks (``Tier.iters`` > 1, shared and blockwise
operands only): each block's outputs against the float64 reference, with the program's last blocks past
the end of X, a residual and its sum, large offsets, and 16-bit storage; and the rule that gives such a
tier only to launches whose every program reads one row of each operand."""

import dataclasses

import pytest
import torch
from test_norm_act_linear_rows import DTYPES, Case, run

from graphopt.fused import Activation
from graphopt.fused.norm_act_linear import triton_kernel
from graphopt.kernels.launch_rules import ELEMENT_BYTES, Tier


def _only(monkeypatch, dtype, tier: Tier) -> None:
    """Makes ``tier`` the first choice of launches of ``dtype``, before the shipped tiers."""
    size = ELEMENT_BYTES[str(dtype).removeprefix("torch.")]
    tiers = triton_kernel.NORM_ACT_LINEAR_TIERS
    monkeypatch.setitem(tiers, size, (tier, *tiers[size]))


def _tier(d: int, block_m: int, iters: int, **kind) -> Tier:
    return Tier(d, block_m, d, 1, iters=iters, exact=True, **kind)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("iters", [2, 4])
@pytest.mark.parametrize("rows", [1, 5, 16, 37])  # under one program, ragged last programs, exact
def test_shared_operands_over_consecutive_blocks(monkeypatch, dtype, iters, rows):
    tier = _tier(64, 2, iters, shared=True)
    _only(monkeypatch, dtype, tier)
    case = Case((rows, 64), 3, scale=(64,), bias=(64,), residual=(rows, 64), linear_bias=(3,), dtype=dtype)
    assert run(case, act=Activation.GELU, out_act=Activation.TANH).tier == tier


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("iters", "k"), [(2, 1), (4, 1), (4, 3)])
def test_per_feature_operands_over_consecutive_blocks(monkeypatch, dtype, iters, k):
    # 3 features of 16 rows: each program's 2 x iters rows lie inside one feature.
    tier = _tier(128, 2, iters, blockwise=True)
    _only(monkeypatch, dtype, tier)
    case = Case((3, 16, 128), k, scale=(3, 1, 128), bias=(3, 1, 128), weight=(3, k, 128),
                linear_bias=(3, 1, k), dtype=dtype)  # fmt: skip
    assert run(case, act=Activation.SILU, out_act=Activation.IDENTITY).tier == tier


def test_large_common_offset_over_consecutive_blocks(monkeypatch):
    tier = _tier(128, 2, 4, blockwise=True)
    _only(monkeypatch, torch.float32, tier)
    case = Case((2, 8, 128), 2, scale=(2, 1, 128), bias=(2, 1, 128), residual=(2, 8, 128), weight=(2, 2, 128),
                linear_bias=(2, 1, 2), mean=1000.0, std=0.1, scale_mean=100.0, scale_std=50.0)  # fmt: skip
    assert run(case, act=Activation.IDENTITY, out_act=Activation.IDENTITY).tier == tier


def test_a_program_that_would_straddle_two_features_takes_another_tier(monkeypatch):
    # 8 rows per feature: blocks of 2 lie inside one, programs of 2 x 8 rows would not.
    tier = _tier(128, 2, 8, blockwise=True)
    _only(monkeypatch, torch.float32, tier)
    case = Case(
        (2, 8, 128), 1, scale=(2, 1, 128), bias=(2, 1, 128), weight=(2, 1, 128), linear_bias=(2, 1, 1)
    )
    assert run(case, act=Activation.RELU, out_act=Activation.IDENTITY).tier != tier


def test_the_rule_admits_a_program_only_where_its_rows_read_one_operand_row():
    tier = _tier(256, 4, 4, blockwise=True)
    assert tier.rows_per_program == 16
    for uniform, admitted in ((16, True), (512, True), (8, False), (4, False), (1, False)):
        assert tier.admits(1 << 16, 256, True, uniform) == admitted
    shared = dataclasses.replace(tier, blockwise=False, shared=True)
    assert shared.admits(37, 256, True, 0) and not shared.admits(37, 256, True, 16)
