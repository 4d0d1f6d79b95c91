import pytest
import torch
from kernel_checks import (
    assert_matches,
    assert_written,
    f64,
    generator,
    poisoned,
    random_rows,
    random_vector,
)

from graphopt.fused import NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear, norm_act_linear_config

# Padded lanes and rows past the end compute values (inf, NaN) that are never stored.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def run_norm_act_linear(rows, cols, k, dtype, *, norm=Norm.LAYER, act=Activation.TANH,
                        out_act=Activation.RELU, scale=False, bias=False, linear_bias=True, eps=1e-5,
                        x_stride=None, mean=0.5, std=2.0, scale_mean=1.0, scale_std=0.5):  # fmt: skip
    gen = generator(rows, cols, k, dtype, norm, act, out_act, scale, bias, linear_bias, eps, x_stride, mean)
    x = random_rows(rows, cols, dtype, gen, row_stride=x_stride, mean=mean, std=std)
    w = random_vector(cols, dtype, gen, mean=scale_mean, std=scale_std) if scale else None
    b = random_vector(cols, dtype, gen, std=0.5) if bias else None
    weight = random_rows(k, cols, dtype, gen, std=cols**-0.5).contiguous()
    lb = random_vector(k, dtype, gen, std=0.5) if linear_bias else None
    y, y_storage = poisoned((rows, k), dtype)

    config = launch_norm_act_linear(x, w, b, weight, lb, y, norm=norm, activation=act, out_activation=out_act,
                                    eps=eps)  # fmt: skip

    what = (f"NormActLinear {rows}x{cols} K={k} {dtype} {Norm(norm).attr} {Activation(act).attr} "
            f"{Activation(out_act).attr} [{config.tier.name}]")  # fmt: skip
    ref = NORM_ACT_LINEAR.reference(
        f64(x), f64(w), f64(b), f64(weight), f64(lb),
        norm=Norm(norm).attr, activation=Activation(act).attr, epsilon=eps,
        out_activation=Activation(out_act).attr,
    )  # fmt: skip
    assert_written(y_storage, rows * k, what)
    assert_matches(y, ref, dtype, what)
    return config


@pytest.mark.parametrize("act", list(Activation))
def test_every_activation(act):
    run_norm_act_linear(5, 48, 3, torch.float32, act=act, out_act=Activation.IDENTITY, scale=True, bias=True)


@pytest.mark.parametrize("out_act", list(Activation))
def test_every_out_activation(out_act):
    run_norm_act_linear(5, 48, 2, torch.float32, norm=Norm.RMS, act=Activation.GELU, out_act=out_act)


def test_seed_case():
    # The pattern this op was made for: layer norm without affine, eps 0, tanh, one output, relu.
    run_norm_act_linear(37, 256, 1, torch.float32, eps=0.0, linear_bias=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("norm", list(Norm))
def test_half_precision(dtype, norm):
    run_norm_act_linear(
        6, 64, 4, dtype, norm=norm, act=Activation.SILU, out_act=Activation.IDENTITY, scale=True
    )


@pytest.mark.parametrize(
    ("rows", "cols", "k", "expect"),
    [
        (1, 128, 1, "exact_a_s_k1"),  # a power-of-two width: no column mask; shared operands; K = 1
        (4, 256, 1, "exact_a_s_k1"),
        (9, 128, 5, "exact_a_s"),  # rows not a multiple of rows-per-program
        (5, 160, 3, "row_a_s"),
        (3, 100, 2, "row_u"),
        (2, 8208, 3, "loop_a_s"),
        (2, 8208, 17, "loop_a_s"),  # more outputs than one accumulated block (16)
        (2, 1500, 2, "loop_u"),
    ],
)
def test_shapes_and_paths(rows, cols, k, expect):
    config = run_norm_act_linear(rows, cols, k, torch.float32, scale=True, bias=True)
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(
    ("rows", "cols", "expect"),
    [(5, 256, "exact_a_s"), (5, 240, "row_a_s"), (3, 100, "row_u"), (2, 8208, "loop_a_s"),
     (5, 768, "+256_w1_exact_a_s")],
)  # fmt: skip
def test_large_common_offset_keeps_full_precision(rows, cols, expect):
    # Rows 1000 + 0.1 * noise and scales up to about 200 (see tests/kernels/test_norm_act.py).
    config = run_norm_act_linear(rows, cols, 3, torch.float32, act=Activation.IDENTITY,
                                 out_act=Activation.IDENTITY, scale=True, bias=True, mean=1000.0, std=0.1,
                                 scale_mean=100.0, scale_std=50.0)  # fmt: skip
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(
    ("rows", "cols", "k", "dtype", "x_stride"),
    [(5, 768, 4, torch.float32, None), (3, 768, 1, torch.bfloat16, 784), (7, 640, 3, torch.float16, None),
     (2, 1280, 2, torch.bfloat16, None), (3, 2560, 5, torch.float32, 2576)],
)  # fmt: skip
def test_rows_read_as_a_head_and_a_tail_tile(rows, cols, k, dtype, x_stride):
    config = run_norm_act_linear(rows, cols, k, dtype, act=Activation.GELU, scale=True, bias=True,
                                 x_stride=x_stride, mean=3.0)  # fmt: skip
    tier = config.tier
    assert tier.tail and tier.block_n + tier.tail == cols and tier.shared, tier.name
    assert not norm_act_linear_config(rows, cols, "float32", uniform=1, out_features=k).tier.tail


def test_strided_rows_and_no_linear_bias():
    run_norm_act_linear(5, 64, 3, torch.float32, x_stride=96, linear_bias=False, out_act=Activation.SIGMOID)


def test_wide_output():
    run_norm_act_linear(3, 64, 40, torch.float32, act=Activation.GELU_TANH, out_act=Activation.IDENTITY)


def test_config_rule():
    assert norm_act_linear_config(16384, 256, "float32").tier.block_n == 256
    assert norm_act_linear_config(3, 100, "bfloat16", aligned=False).tier.name.endswith("row_u")
    with pytest.raises(ValueError):
        norm_act_linear_config(3, -1, "float32")
