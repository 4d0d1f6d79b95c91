import math

import numpy as np
import pytest
import torch
from kernel_checks import (
    assert_matches,
    assert_same_specials,
    device,
    f64,
    generator,
    poisoned,
    random_vector,
)

from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.affine_act.torch_impl import launch
from graphopt.fused.affine_act.triton_kernel import affine_act_config, launch_affine_act
from graphopt.fused.spec import Activation

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def run(x, scale, bias, act: Activation, axis: int, tol=None):
    """Launches the kernel on x (any shape) through the op's glue and checks it against the reference."""
    dim = axis % x.dim()
    y = launch(x, scale, bias, act, dim)
    ref = AFFINE_ACT.reference(f64(x), f64(scale), f64(bias), activation=act.attr, axis=axis)
    what = f"AffineAct {list(x.shape)} {x.dtype} {act.attr} axis {axis}"
    assert y.shape == x.shape and y.dtype == x.dtype
    if np.isfinite(ref).all():
        assert_matches(y, ref, x.dtype, what, tol)
    else:
        assert_same_specials(f64(y), ref, x.dtype, what)
    return y


def inputs(shape, dtype, axis, *key, mean=0.0, std=1.0, scale=True, bias=True):
    gen = generator(tuple(shape), dtype, axis, mean, std, scale, bias, *key)
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype).to(device())
    channels = shape[axis]
    s = random_vector(channels, dtype, gen, mean=1.0, std=0.5) if scale else None
    b = random_vector(channels, dtype, gen, std=0.5) if bias else None
    return x, s, b


@pytest.mark.parametrize("act", list(Activation))
@pytest.mark.parametrize(
    ("shape", "axis"), [((3, 5, 96), -1), ((2, 6, 7, 5), 1), ((4, 33), -1), ((3, 4, 1, 1), 1)]
)
def test_every_activation_on_each_channel_layout(act, shape, axis):
    run(*inputs(shape, torch.float32, axis, act), act, axis)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", list(Activation))
def test_half_precision(dtype, act):
    run(*inputs((4, 3, 256), dtype, -1, act, std=3.0), act, -1)
    run(*inputs((2, 8, 9, 9), dtype, 1, act, std=3.0), act, 1)


@pytest.mark.parametrize(("scale", "bias"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_optional_scale_and_bias(scale, bias, axis):
    run(*inputs((2, 3, 4, 5), torch.float32, axis, scale=scale, bias=bias), Activation.GELU, axis)


def test_rows_longer_than_a_tile_and_many_row_blocks():
    assert affine_act_config(3, 5000, "float32").tier.looped
    run(*inputs((3, 5000), torch.float32, -1), Activation.SILU, -1)
    run(*inputs((700, 3, 2), torch.float32, 1), Activation.RELU, 1)


def test_writes_every_element_and_nothing_past_the_end():
    x, s, b = inputs((37, 129), torch.float16, -1)
    y, storage = poisoned((37, 129), torch.float16)
    launch_affine_act(x, s, b, y, channels=129, per_row=False, activation=int(Activation.TANH))
    assert not torch.isnan(y).any()
    assert torch.isnan(storage[37 * 129 :]).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", list(Activation))
def test_large_offsets(dtype, act):
    """Inputs far from zero (a bias of a few hundred, or -1e6 in float32): the tails of every
    activation (GELU's x * Phi(x) of a large negative x is -0, not x * Phi(-6))."""
    big = 1e6 if dtype == torch.float32 else 300.0
    x, s, b = inputs((5, 64), dtype, -1, act, mean=0.0, std=big)
    run(x, s, b, act, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", list(Activation))
def test_near_dtype_max_and_non_finite(dtype, act):
    finfo = torch.finfo(dtype)
    values = [finfo.max, -finfo.max, finfo.max / 3, -finfo.max / 3, math.inf, -math.inf, math.nan, 0.0, -0.0,
              finfo.tiny, 1.0, -1.0, 7.5, -7.5, 12.0, -12.0]  # fmt: skip
    x = torch.tensor(values * 4, dtype=torch.float64).to(dtype).reshape(4, len(values)).to(device())
    scale = torch.ones(len(values), dtype=dtype, device=device())
    scale[::3] = 2.0  # (pushes some finite values past the type's range: inf, as the reference gives)
    bias = torch.zeros(len(values), dtype=dtype, device=device())
    run(x, scale, bias, act, -1)
    run(x.t().contiguous().reshape(1, len(values), 4), scale, bias, act, 1)


def test_non_contiguous_input_is_read_as_its_values():
    x, _, b = inputs((6, 8, 5), torch.float32, 0)
    run(x.transpose(0, 2), None, b, Activation.SIGMOID, 2)
