"""NaN and infinities through the norm kernels, for every activation: rows holding NaN, +inf or -inf
(in X, or in the residual added to it) and columns whose scale or bias is infinite or NaN, so that
each activation also meets +inf, -inf and NaN. NaN and infinities must sit exactly where the float64
reference has them (relu(NaN) is NaN; gelu and silu of -inf are -inf * 0, NaN), the rest must match.
AffineAct's kernel meets the same values in tests/kernels/test_affine_act.py."""

import math

import numpy as np
import pytest
import torch
from kernel_checks import assert_same_specials, device, f64, generator, random_rows, random_vector

from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.fused.norm_act.triton_kernel import launch_norm_act
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NAN, INF = math.nan, math.inf
ACTIVATIONS = pytest.mark.parametrize("act", list(Activation), ids=lambda a: a.attr)


def poisoned_rows(rows, cols, dtype, gen, far=0) -> torch.Tensor:
    """Random rows; row 0 holds a NaN, row 1 +inf, row 2 -inf, row 3 both infinities, at columns
    ``far`` and after (the rest are finite)."""
    x = random_rows(rows, cols, dtype, gen)
    x[0, far + 3], x[1, far + 5], x[2, far], x[3, far + 1], x[3, far + 2] = NAN, INF, -INF, INF, -INF
    return x


def special_columns(cols, dtype, gen) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, bias): random, but scale +inf in column 9 and NaN in 10; bias -inf in column 11, +inf
    in 13 and NaN in 15, so every clean row's activation sees +inf, -inf and NaN."""
    scale = random_vector(cols, dtype, gen, mean=1.0, std=0.5)
    bias = random_vector(cols, dtype, gen, std=0.5)
    scale[9], scale[10] = INF, NAN
    bias[11], bias[13], bias[15] = -INF, INF, NAN
    return scale, bias


@ACTIVATIONS
@pytest.mark.parametrize("norm", list(Norm), ids=lambda n: n.attr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_norm_act(act, norm, dtype):
    gen = generator("non-finite", act, norm, dtype)
    x = poisoned_rows(7, 48, dtype, gen)
    scale, bias = special_columns(48, dtype, gen)
    y = torch.empty_like(x)
    launch_norm_act(x, scale, bias, None, y, None, norm=norm, activation=act, eps=1e-5)
    ref, _ = NORM_ACT.reference(
        f64(x), f64(scale), f64(bias), norm=norm.attr, activation=act.attr, epsilon=1e-5, axis=-1
    )
    assert_same_specials(f64(y), ref, dtype, f"NormAct {norm.attr} {act.attr} {dtype}")


@ACTIVATIONS
def test_norm_act_residual_and_long_rows(act):
    """Specials in the residual (ResidualSum keeps them), and in a later chunk of looped rows."""
    gen = generator("non-finite residual", act)
    x = random_rows(6, 8208, torch.float32, gen)
    r = poisoned_rows(6, 8208, torch.float32, gen, far=5000)
    scale, bias = special_columns(8208, torch.float32, gen)
    y, s = torch.empty_like(x), torch.empty_like(x)
    launch_norm_act(x, scale, bias, r, y, s, norm=Norm.LAYER, activation=act, eps=1e-5)
    ref, ref_sum = NORM_ACT.reference(
        f64(x), f64(scale), f64(bias), f64(r), norm="layer", activation=act.attr, epsilon=1e-5, axis=-1
    )
    assert_same_specials(f64(s), ref_sum, torch.float32, "NormAct ResidualSum")
    assert_same_specials(f64(y), ref, torch.float32, f"NormAct looped {act.attr}")


@ACTIVATIONS
@pytest.mark.parametrize(
    ("cols", "dtype"),
    [
        (5120, torch.float32),
        (1536, torch.bfloat16),
        (640, torch.bfloat16),
        (2560, torch.float16),
        (768, torch.bfloat16),
    ],
    ids=str,
)  # (640: two rows a program)
def test_norm_act_head_and_tail_tiles(act, cols, dtype):
    """Specials in the head tile and in the tail tile of rows read as two (NormAct's ``Tier.tail``)."""
    gen = generator("non-finite two tiles", act, cols, dtype)
    x = poisoned_rows(8, cols, dtype, gen)
    x[4:] = poisoned_rows(4, cols, dtype, gen, far=cols - 16)[:4]  # rows 4-7: specials in the tail
    scale, bias = special_columns(cols, dtype, gen)
    y = torch.empty_like(x)
    config = launch_norm_act(x, scale, bias, None, y, None, norm=Norm.LAYER, activation=act, eps=1e-5)
    assert config.tier.tail, config.tier.name
    ref, _ = NORM_ACT.reference(
        f64(x), f64(scale), f64(bias), norm="layer", activation=act.attr, epsilon=1e-5, axis=-1
    )
    assert_same_specials(f64(y), ref, dtype, f"NormAct two tiles {cols} {act.attr} {dtype}")


@ACTIVATIONS
@pytest.mark.parametrize("cols", [48, 768, 8208])  # (768: a head and a tail tile)
def test_norm_act_linear(act, cols):
    """Specials in X's rows (NaN rows of Y) and a norm bias of -inf in one column: act(-inf) is a
    term of every dot product of the clean rows (an infinite term makes the output infinite, 0 and -1
    leave it finite, NaN makes it NaN)."""
    gen = generator("non-finite linear", act, cols)
    x = poisoned_rows(6, cols, torch.float32, gen)
    bias = random_vector(cols, torch.float32, gen, std=0.5)
    bias[11] = -INF
    weight = random_rows(3, cols, torch.float32, gen, std=cols**-0.5).contiguous()
    lb = random_vector(3, torch.float32, gen)
    y = torch.empty(6, 3, dtype=torch.float32, device=device())
    launch_norm_act_linear(x, None, bias, weight, lb, y, norm=Norm.LAYER, activation=act,
                           out_activation=Activation.IDENTITY, eps=1e-5)  # fmt: skip
    ref = NORM_ACT_LINEAR.reference(f64(x), None, f64(bias), f64(weight), f64(lb), norm="layer",
                                    activation=act.attr, epsilon=1e-5, out_activation="identity")  # fmt: skip
    assert_same_specials(f64(y), ref, torch.float32, f"NormActLinear {act.attr} D={cols}")


@ACTIVATIONS
@pytest.mark.parametrize("shape", [(2, 8, 3, 5), (2, 8, 75, 61)])
def test_group_norm_act(act, shape):
    """A NaN in group 0 of sample 0, +inf in group 1, -inf in group 2 of sample 1; channel 5's
    scale infinite, channel 6's bias -inf and channel 7's +inf (in the clean groups)."""
    gen = generator("non-finite group", act, shape)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).to(torch.float32).to(device())
    x[0, 0, 1, 2], x[0, 3, 0, 0], x[1, 4, 2, 4] = NAN, INF, -INF
    scale, bias = (
        random_vector(shape[1], torch.float32, gen, mean=1.0),
        random_vector(shape[1], torch.float32, gen),
    )
    scale[5], bias[6], bias[7] = INF, -INF, INF
    y = torch.empty_like(x)
    launch_group_norm_act(x, scale, bias, None, y, None, groups=4, activation=int(act), eps=1e-5)
    ref, _ = GROUP_NORM_ACT.reference(
        f64(x), f64(scale), f64(bias), groups=4, activation=act.attr, epsilon=1e-5
    )
    assert_same_specials(f64(y), ref, torch.float32, f"GroupNormAct {act.attr} {list(shape)}")
    assert np.isnan(f64(y)[0, :2]).all()
