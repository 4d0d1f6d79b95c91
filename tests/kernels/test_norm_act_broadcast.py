"""NormAct's kernel with operands that broadcast over X's leading dims (per-slice scale and bias,
broadcast residuals), against the spec's float64 reference broadcasting the same shapes."""

import math

import numpy as np
import pytest
import torch
from kernel_checks import assert_matches, assert_written, device, f64, generator, poisoned

from graphopt.fused import NORM_ACT, Activation, Norm
from graphopt.fused.broadcast_rows import RowBroadcast, row_broadcast
from graphopt.fused.norm_act.triton_kernel import launch_norm_act

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _random(shape, dtype, gen, *, mean=0.0, std=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype).to(device())


def run_broadcast(x_shape, *, scale=None, bias=None, residual=None, dtype=torch.float32, norm=Norm.LAYER,
                  act=Activation.GELU, mean=0.0, std=1.0, scale_mean=1.0, scale_std=0.5,
                  poison_row=None):  # fmt: skip
    """Runs the kernel on X of ``x_shape`` with operands of the given shapes (None: absent) and
    checks Y and ResidualSum against the reference; returns the launch config."""
    gen = generator(x_shape, scale, bias, residual, dtype, norm, act, mean)
    x = _random(x_shape, dtype, gen, mean=mean, std=std)
    if poison_row is not None:
        x.view(-1, x_shape[-1])[poison_row, 3] = float("nan")
    w = None if scale is None else _random(scale, dtype, gen, mean=scale_mean, std=scale_std)
    b = None if bias is None else _random(bias, dtype, gen, std=0.5)
    r = None if residual is None else _random(residual, dtype, gen)
    cols = x_shape[-1]
    rows = math.prod(x_shape) // cols
    y, y_storage = poisoned((rows, cols), dtype)
    s, s_storage = poisoned((rows, cols), dtype) if r is not None else (None, None)

    def rows_of(t):
        return None if t is None else row_broadcast(t.shape, x_shape, -1)

    config = launch_norm_act(
        x.view(rows, cols), None if w is None else w.reshape(-1), None if b is None else b.reshape(-1),
        None if r is None else r.reshape(-1, cols), y, s, norm=norm, activation=act, eps=1e-5,
        scale_rows=rows_of(w) or (1, 1), bias_rows=rows_of(b) or (1, 1), residual_rows=rows_of(r),
    )  # fmt: skip

    what = f"NormAct {list(x_shape)} scale {scale} bias {bias} residual {residual} {dtype}"
    what += f" [{config.tier.name}]"
    ref_sum = None if r is None else f64((x.float() + r.float()).to(dtype))
    ref, _ = NORM_ACT.reference(
        f64(x) if r is None else ref_sum, f64(w), f64(b),
        norm=norm.attr, activation=act.attr, epsilon=1e-5, axis=-1,
    )  # fmt: skip
    ref = ref.reshape(rows, cols)
    if poison_row is None:
        assert_written(y_storage, rows * cols, what)
    else:  # the NaN row is NaN, the guard past the end untouched, the other rows checked below
        assert torch.isnan(y[poison_row]).all() and torch.isnan(y_storage[rows * cols :]).all(), what
        keep = np.arange(rows) != poison_row
        y, ref = y[torch.from_numpy(keep).to(y.device)], ref[keep]
    assert_matches(y, ref, dtype, what)
    if r is not None:
        ref_sum = ref_sum.reshape(rows, cols)
        if poison_row is not None:
            assert torch.isnan(s[poison_row, 3]) and torch.isnan(s_storage[rows * cols :]).all(), what
            s, ref_sum = s[torch.from_numpy(keep).to(s.device)], ref_sum[keep]
        else:
            assert_written(s_storage, rows * cols, what + " ResidualSum")
        assert_matches(s, ref_sum, dtype, what + " ResidualSum")
    return config


@pytest.mark.parametrize(
    ("x", "operand", "expect"),
    [
        ((2, 16, 64), (64,), (1, 1)),
        ((2, 16, 64), (16, 64), (1, 16)),
        ((2, 16, 64), (1, 16, 64), (1, 16)),
        ((2, 16, 64), (2, 16, 64), (1, 32)),
        ((32, 8, 16), (32, 1, 16), (8, 32)),
        ((3, 4, 5, 6), (4, 1, 6), (5, 4)),
        ((3, 1, 5, 6), (3, 1, 5, 6), (1, 15)),
    ],
)
def test_row_broadcast_of_expressible_shapes(x, operand, expect):
    assert row_broadcast(operand, x, -1) == RowBroadcast(*expect)


@pytest.mark.parametrize(
    ("x", "operand", "why"),
    [
        ((3, 4, 5, 6), (3, 1, 5, 6), "more than one block"),
        ((2, 16, 64), (1,), "does not end in the normalized dims"),
        ((2, 16, 64), (4, 64), "not a broadcast"),
        ((16, 64), (1, 16, 64), "above X's"),
    ],
)
def test_row_broadcast_names_what_it_cannot_read(x, operand, why):
    assert why in row_broadcast(operand, x, -1)


def test_reference_refuses_what_the_kernels_cannot_read():
    with pytest.raises(ValueError, match="scale shape"):
        NORM_ACT.reference(
            np.zeros((2, 3, 4)), np.ones((1,)), norm="layer", activation="relu", epsilon=0.0, axis=-1
        )


@pytest.mark.parametrize("norm", list(Norm))
@pytest.mark.parametrize(
    ("x", "expect"),
    [
        ((5, 3, 40), "row_u"),  # unaligned rows
        ((6, 7, 128), "i2_exact_a"),  # several blocks per program: per-block scale rows
        ((3, 2, 256), "exact_a"),
        ((2, 2, 8208), "loop_a"),  # the looped reduction reads scale rows per chunk
    ],
)
def test_per_slice_scale_and_bias(norm, x, expect):
    n, d = x[0], x[-1]
    bias = (n, 1, d) if norm is Norm.LAYER else None
    config = run_broadcast(x, scale=(n, 1, d), bias=bias, norm=norm)
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(("scale", "bias"), [((4, 1, 64), (64,)), ((64,), (4, 1, 64)), (None, (4, 1, 64))])
def test_scale_and_bias_broadcast_independently(scale, bias):
    run_broadcast((4, 5, 64), scale=scale, bias=bias, act=Activation.SILU)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_per_slice_half_precision(dtype):
    run_broadcast((8, 9, 128), scale=(8, 1, 128), bias=(8, 1, 128), dtype=dtype, act=Activation.RELU)


@pytest.mark.parametrize(
    ("x", "residual"),
    [
        ((2, 16, 64), (1, 16, 64)),  # DistilBERT's position embeddings
        ((2, 32, 64), (32, 64)),  # Whisper's
        ((4, 3, 128), (4, 1, 128)),  # one row per slice
        ((37, 2, 256), (2, 256)),  # several blocks per program
        ((2, 2, 8208), (2, 8208)),  # looped
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_broadcast_residual(x, residual, dtype):
    run_broadcast(x, scale=(x[-1],), bias=(x[-1],), residual=residual, dtype=dtype, act=Activation.IDENTITY)


def test_everything_per_row_at_once():
    run_broadcast((6, 5, 96), scale=(6, 1, 96), bias=(6, 1, 96), residual=(5, 96), norm=Norm.RMS,
                  act=Activation.TANH)  # fmt: skip


@pytest.mark.parametrize("x", [(3, 4, 96), (2, 2, 8208)])
def test_large_common_offset_with_per_slice_scale(x):
    # Rows 1000 + 0.1 * noise with scales about 100: the fp32 tolerance must hold per slice too.
    run_broadcast(x, scale=(x[0], 1, x[-1]), bias=(x[0], 1, x[-1]), act=Activation.IDENTITY, mean=1000.0,
                  std=0.1, scale_mean=100.0, scale_std=50.0)  # fmt: skip


def test_a_nan_row_stays_in_its_row():
    run_broadcast((4, 6, 64), scale=(4, 1, 64), bias=(4, 1, 64), residual=(6, 64), poison_row=9)
