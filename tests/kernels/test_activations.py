import math
import zlib

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from kernel_checks import device

from graphopt.fused import Activation
from graphopt.fused.spec import activation_reference
from graphopt.kernels.activations import apply_activation

BLOCK = 1024


@triton.jit
def _activate(X, Y, n, kind, STORAGE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(X + offs, mask=ok, other=0.0)
    tl.store(Y + offs, apply_activation(x, kind, STORAGE), mask=ok)


def activated(x: np.ndarray, act: Activation, storage) -> np.ndarray:
    """The kernels' fp32 activation for a result stored as ``storage``, before that rounding."""
    xt = torch.from_numpy(x.astype(np.float32)).to(device())
    y = torch.full_like(xt, float("nan"))
    _activate[(triton.cdiv(xt.numel(), BLOCK),)](xt, y, xt.numel(), int(act), STORAGE=storage, BLOCK=BLOCK)
    return y.cpu().double().numpy()


def exact_gelu(x: np.ndarray) -> np.ndarray:
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])


def grid(seed: int, limit: float) -> np.ndarray:
    """Dense values over [-limit, limit], fresh random ones between them, and the points where
    the formulas switch (0, the clamp)."""
    rng = np.random.default_rng(seed)
    dense = np.linspace(-limit, limit, 8001)
    edges = np.array([0.0, 6.0, -6.0, 1e-3, -1e-3, 1e-30, -1e-30])
    return np.concatenate([dense, rng.uniform(-limit, limit, 4000), edges]).astype(np.float32).astype(float)


@pytest.mark.parametrize(
    ("storage", "bound"),
    [
        # (the dtype, a quarter of its half ulp, relative)
        (tl.float16, 2.0**-11 / 4),
        (tl.bfloat16, 2.0**-8 / 4),
    ],
)
def test_gelu_for_16_bit_results_is_within_a_quarter_of_their_rounding(storage, bound):
    x = grid(zlib.crc32(str(storage).encode()), 6.0)
    got, want = activated(x, Activation.GELU, storage), exact_gelu(x)
    relative = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    assert relative[np.abs(x) > 1e-20].max() <= bound
    # Past the clamp the tail is Phi(-6) < 1e-9 and the negative side 0: off by less than 1e-9 * |x|.
    far = np.array([-30.0, -7.0, 7.0, 30.0])
    assert np.all(np.abs(activated(far, Activation.GELU, storage) - exact_gelu(far)) <= 1e-9 * np.abs(far))


def test_gelu_for_fp32_results():
    x = grid(32, 9.0)
    got, want = activated(x, Activation.GELU, tl.float32), exact_gelu(x)
    assert (np.abs(got - want) / np.maximum(np.abs(x), 1.0)).max() <= 5e-7


@pytest.mark.parametrize("storage", [tl.float32, tl.float16, tl.bfloat16])
def test_tanh(storage):
    x = grid(7, 12.0)
    got = activated(x, Activation.TANH, storage)
    # The hardware tanh (bf16 results, on a GPU) is within 2^-10.9 relative; the formula within
    # a few fp32 ulps of 1.0 (2^-23) in absolute terms (the GPU's exp2 and division are approximate).
    tolerance = 2.0**-10.9 if storage == tl.bfloat16 and device() == "cuda" else 3 * 2.0**-23
    assert np.abs(got - np.tanh(x)).max() <= tolerance
    assert np.all(np.abs(got) <= 1.0)


@pytest.mark.parametrize("storage", [tl.float32, tl.float16, tl.bfloat16], ids=str)
@pytest.mark.parametrize("act", list(Activation), ids=lambda a: a.attr)
def test_non_finite_and_huge_inputs_give_what_the_reference_gives(storage, act):
    """NaN where the float64 reference has NaN (relu of NaN, gelu and silu of -inf: -inf * 0),
    its infinities, and its values elsewhere: gelu(-1e30) is -0, not -1e30 * Phi(-6)."""
    x = np.array([np.nan, np.inf, -np.inf, -1e30, 1e30, -3e38, -100.0, -6.5, 0.0, 2.0])
    got = activated(x, act, storage)
    want = activation_reference(act, x.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN of {x}")
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=4e-3, atol=1e-8)
