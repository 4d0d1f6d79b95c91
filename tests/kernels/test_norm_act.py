import pytest
import torch
from kernel_checks import (
    assert_matches,
    assert_written,
    device,
    f64,
    generator,
    poisoned,
    random_rows,
    random_vector,
)

from graphopt.fused import NORM_ACT, Activation, Norm
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config, norm_act_tiers
from graphopt.kernels.launch_rules import ALIGN_ELEMENTS

# Padded lanes and rows past the end compute values (inf, NaN) that are never stored.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def run_norm_act(rows, cols, dtype, *, norm, act, scale=True, bias=True, residual=False, eps=1e-5,
                 x_stride=None, r_stride=None, mean=0.0, std=1.0, scale_mean=1.0, scale_std=0.5,
                 tol=None):  # fmt: skip
    """Runs the kernel on fresh inputs and checks Y (and ResidualSum) against the reference."""
    gen = generator(rows, cols, dtype, norm, act, scale, bias, residual, eps, x_stride, r_stride, mean)
    x = random_rows(rows, cols, dtype, gen, row_stride=x_stride, mean=mean, std=std)
    r = random_rows(rows, cols, dtype, gen, row_stride=r_stride) if residual else None
    w = random_vector(cols, dtype, gen, mean=scale_mean, std=scale_std) if scale else None
    b = random_vector(cols, dtype, gen, std=0.5) if bias else None
    y, y_storage = poisoned((rows, cols), dtype)
    s, s_storage = poisoned((rows, cols), dtype) if residual else (None, None)

    config = launch_norm_act(x, w, b, r, y, s, norm=norm, activation=act, eps=eps)

    what = f"NormAct {rows}x{cols} {dtype} {Norm(norm).attr} {Activation(act).attr} [{config.tier.name}]"
    # The norm sees the sum as stored (added in fp32, rounded once to the storage type).
    ref_sum = None if r is None else f64((x.float() + r.float()).to(dtype))
    ref, _ = NORM_ACT.reference(
        f64(x) if r is None else ref_sum, f64(w), f64(b),
        norm=Norm(norm).attr, activation=Activation(act).attr, epsilon=eps, axis=-1,
    )  # fmt: skip
    assert_written(y_storage, rows * cols, what)
    assert_matches(y, ref, dtype, what, tol)
    if residual:
        assert_written(s_storage, rows * cols, what + " ResidualSum")
        assert_matches(s, ref_sum, dtype, what + " ResidualSum")
    return config


@pytest.mark.parametrize("norm", list(Norm))
@pytest.mark.parametrize("act", list(Activation))
def test_every_activation_and_norm(norm, act):
    affine = int(act) % 2 == 0  # alternate scale + bias on and off across activations
    run_norm_act(6, 48, torch.float32, norm=norm, act=act, scale=affine, bias=affine and norm is Norm.LAYER)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("norm", list(Norm))
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("cols", [64, 128])
def test_half_precision(dtype, norm, residual, cols):
    config = run_norm_act(5, cols, dtype, norm=norm, act=Activation.GELU, residual=residual)
    assert config.tier.exact == (cols == config.tier.block_n)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", list(Activation))
def test_half_precision_every_activation(dtype, act):
    run_norm_act(9, 256, dtype, norm=Norm.LAYER, act=act, std=3.0)


@pytest.mark.parametrize(
    ("scale", "bias", "residual"),
    [
        (False, False, False),
        (True, False, False),
        (False, True, False),
        (False, False, True),
        (True, True, True),
    ],
)
def test_optional_inputs(scale, bias, residual):
    run_norm_act(7, 32, torch.float32, norm=Norm.LAYER, act=Activation.SILU, scale=scale, bias=bias,
                 residual=residual)  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "cols", "expect"),
    [
        (1, 256, "exact_a_s"),  # a single row
        (7, 128, "exact_a_s"),  # rows not a multiple of rows-per-program
        (37, 256, "i2_exact_a_s"),  # two row blocks per program, the second partly past the end
        (37, 192, "i2_row_a_s"),  # shorter than the block: masked columns
        (3, 100, "row_u"),  # a row length that is not a multiple of 16
        (2, 1, "row_u"),  # one element per row
        (3, 8208, "loop_a"),  # past the largest single block: the looped reduction
        (2, 1500, "loop_u"),  # looped and unaligned
    ],
)
def test_shapes_and_paths(rows, cols, expect):
    config = run_norm_act(rows, cols, torch.float32, norm=Norm.LAYER, act=Activation.TANH, residual=True)
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize(
    ("rows", "cols", "dtype", "norm", "residual", "x_stride"),
    [
        (3, 5120, torch.float32, Norm.LAYER, True, None),  # a head of 4096 columns and a tail of 1024
        (2, 5120, torch.float32, Norm.RMS, False, 5136),  # strided rows
        (5, 1536, torch.bfloat16, Norm.LAYER, True, None),  # 1024 + 512
        (2, 3072, torch.float16, Norm.LAYER, False, None),  # 2048 + 1024
        (5, 640, torch.bfloat16, Norm.LAYER, True, None),  # 512 + 128, two rows a program
        (3, 768, torch.float16, Norm.LAYER, True, None),  # 512 + 256, one warp
        (3, 768, torch.bfloat16, Norm.RMS, False, 784),
        (3, 1280, torch.float16, Norm.RMS, True, 1296),  # 1024 + 256
        (2, 2560, torch.bfloat16, Norm.LAYER, False, None),  # 2048 + 512
        (2, 5120, torch.float16, Norm.LAYER, True, None),  # 4096 + 1024
        (2, 12288, torch.float32, Norm.LAYER, True, None),  # 8192 + 4096
        (2, 12288, torch.float32, Norm.RMS, True, 12304),
    ],
)
def test_rows_read_as_a_head_and_a_tail_tile(rows, cols, dtype, norm, residual, x_stride):
    config = run_norm_act(rows, cols, dtype, norm=norm, act=Activation.GELU, residual=residual,
                          x_stride=x_stride, mean=3.0, std=2.0)  # fmt: skip
    tier = config.tier
    assert tier.tail and tier.block_n + tier.tail == cols and tier.exact and tier.shared, tier.name


def test_a_head_and_tail_tier_serves_only_its_width_and_shared_operands():
    for cols in (5104, 5136, 8192):
        assert not norm_act_config(8, cols, "float32").tier.tail
    assert not norm_act_config(8, 768, "float32").tier.tail  # (fp32 rows of 768 keep the padded block)
    assert not norm_act_config(8, 768, "bfloat16", uniform=1).tier.tail
    assert not norm_act_config(8, 5120, "float32", uniform=1).tier.tail  # per-row scale or bias
    assert not norm_act_config(8, 5120, "float32", aligned=False).tier.tail
    assert norm_act_config(8, 12288, "bfloat16").tier.looped  # (16-bit rows of 12288 measured faster so)


def test_several_blocks_per_program_with_strided_rows():
    config = run_norm_act(
        13, 128, torch.float32, norm=Norm.RMS, act=Activation.SILU, residual=True, x_stride=144
    )
    assert config.tier.iters > 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_strided_rows(dtype):
    config = run_norm_act(5, 64, dtype, norm=Norm.RMS, act=Activation.GELU_TANH, bias=False, residual=True,
                          x_stride=80, r_stride=96)  # fmt: skip
    assert config.tier.aligned
    run_norm_act(4, 64, dtype, norm=Norm.LAYER, act=Activation.RELU, x_stride=72)  # stride breaks alignment


@pytest.mark.parametrize(
    ("rows", "cols", "expect"),
    [
        (3, 96, "row_a_s"),
        (37, 256, "i2_exact_a_s"),
        (2, 1024, "exact_a_s"),
        (3, 8208, "loop_a"),
        (2, 1500, "loop_u"),
        (2, 5120, "n4096+1024_w8_exact_a_s"),  # a head and a tail tile
    ],
)
@pytest.mark.parametrize("residual", [False, True])
def test_large_common_offset_keeps_full_precision(rows, cols, expect, residual):
    # Rows 1000 + 0.1 * noise and scales up to about 200: the statistics must lose nothing to the
    # offset (a plain fp32 sum of the row is off by 6e-4, 0.12 after the scale), so the usual fp32
    # tolerance holds.
    config = run_norm_act(rows, cols, torch.float32, norm=Norm.LAYER, act=Activation.IDENTITY,
                          residual=residual, mean=1000.0, std=0.1, scale_mean=100.0,
                          scale_std=50.0)  # fmt: skip
    assert config.tier.name.endswith(expect)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_epsilon(eps):
    run_norm_act(3, 64, torch.float32, norm=Norm.RMS, act=Activation.SIGMOID, bias=False, eps=eps)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_long_rows_every_dtype(dtype):
    run_norm_act(3, 20000, dtype, norm=Norm.LAYER, act=Activation.GELU, residual=True, x_stride=20016)


def test_zero_rows_launch_nothing():
    x = torch.empty(0, 64, device=random_vector(1, torch.float32, generator(0)).device)
    y = torch.empty_like(x)
    assert launch_norm_act(x, None, None, None, y, None, norm=0, activation=0, eps=1e-5).grid == (0, 1, 1)


@pytest.mark.parametrize("uniform", [0, 1, 4])
def test_config_rule(uniform):
    tiers = norm_act_tiers("float32")
    # Scale and bias that all rows share (uniform 0) take the shared-operand copies, others the rest.
    # (the head-and-tail tiers apart: each serves one width, tested above)
    singles = [t for t in tiers if t.aligned and not t.looped and not t.tail and t.shared == (uniform == 0)]
    for tier in singles:
        # An exact tier takes rows of its width; the general one of that width the shorter rows.
        cols = tier.max_cols if tier.exact else tier.max_cols - ALIGN_ELEMENTS
        assert norm_act_config(1000, cols, "float32", uniform=uniform).tier == tier
    assert [t.max_cols for t in singles if t.exact] == [t.max_cols for t in singles if not t.exact]
    largest = singles[-1].max_cols
    assert norm_act_config(10, largest + ALIGN_ELEMENTS, "float32").tier.looped
    config = norm_act_config(1001, 256, "bfloat16")
    assert config.grid == (-(-1001 // (config.tier.block_m * config.tier.iters)), 1, 1)
    assert not norm_act_config(4, 256, "float16", aligned=False).tier.aligned
    with pytest.raises(ValueError):
        norm_act_config(4, 0, "float32")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_residual_sum_is_rounded_to_storage_before_the_norm(dtype):
    # x = 1000 and r = 0.05..0.45: the stored sums take two values per row, so every row normalizes
    # to +-1; row 0 overflows the storage type, so the original's row is NaN.
    top = torch.finfo(dtype).max
    x = torch.full((4, 8), 1000.0, dtype=torch.float64)
    r = torch.linspace(0.05, 0.45, 8, dtype=torch.float64) * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    x[0], r[0] = top, torch.linspace(-top / 4, top / 4, 8, dtype=torch.float64)
    x, r = x.to(dtype).to(device()), r.to(dtype).to(device())
    y, s = torch.empty_like(x), torch.empty_like(x)

    launch_norm_act(x, None, None, r, y, s, norm=Norm.LAYER, activation=Activation.IDENTITY, eps=1e-5)

    stored = (x.float() + r.float()).to(dtype)
    # (Not bit for bit: the interpreter rounds huge values to bf16 unlike the GPU.)
    assert torch.equal(torch.isinf(s), torch.isinf(stored)) and torch.isinf(s[0]).any()
    assert_matches(s[1:], f64(stored[1:]), dtype, f"NormAct {dtype} ResidualSum")
    assert torch.isnan(y[0]).all()
    ref, _ = NORM_ACT.reference(f64(stored[1:]), norm="layer", activation="identity", epsilon=1e-5, axis=-1)
    assert_matches(y[1:], ref, dtype, f"NormAct {dtype} rounded residual sum")
