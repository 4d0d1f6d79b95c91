"""NormActLinear's kernel with a residual (and its sum) and with operands read row by row (per-slice
scale, bias, weight matrices and linear bias; broadcast residuals), against the spec's float64
reference, on random and adversarial rows, in every storage dtype."""

import math

import numpy as np
import pytest
import torch
from kernel_checks import assert_matches, assert_written, device, f64, generator, poisoned

from graphopt.fused import NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.broadcast_rows import row_broadcast
from graphopt.fused.norm_act_linear.spec import weight_rows
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _random(shape, dtype, gen, *, mean=0.0, std=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype).to(device())


class Case:
    """Operands of one launch (None: absent), drawn from the case's own generator."""

    def __init__(self, x_shape, k, *, scale=None, bias=None, residual=None, weight=None, linear_bias=None,
                 dtype=torch.float32, mean=0.0, std=1.0, scale_mean=1.0, scale_std=0.5):  # fmt: skip
        d = x_shape[-1]
        gen = generator(x_shape, k, scale, bias, residual, weight, linear_bias, dtype, mean)
        self.x_shape, self.k, self.dtype = x_shape, k, dtype
        self.x = _random(x_shape, dtype, gen, mean=mean, std=std)
        self.w = None if scale is None else _random(scale, dtype, gen, mean=scale_mean, std=scale_std)
        self.b = None if bias is None else _random(bias, dtype, gen, std=0.5)
        self.r = None if residual is None else _random(residual, dtype, gen)
        self.weight = _random(weight or (k, d), dtype, gen, std=d**-0.5)
        self.lb = None if linear_bias is None else _random(linear_bias, dtype, gen, std=0.5)

    @property
    def rows(self):
        return math.prod(self.x_shape[:-1])

    def stored_sum(self):
        """X + R as the storage type holds it (what the norm reads)."""
        return self.x if self.r is None else (self.x.float() + self.r.float()).to(self.dtype)

    def reference(self, norm, act, out_act):
        y = NORM_ACT_LINEAR.reference(
            f64(self.stored_sum()), f64(self.w), f64(self.b), f64(self.weight), f64(self.lb),
            norm=norm.attr, activation=act.attr, epsilon=1e-5, out_activation=out_act.attr,
        )  # fmt: skip
        return y.reshape(self.rows, self.k)

    def launch(self, y, s, norm, act, out_act):
        d, shape = self.x_shape[-1], self.x_shape
        y_shape = (*shape[:-1], self.k)

        def rows_of(t, against):
            return (1, 1) if t is None else row_broadcast(t.shape, against, -1)

        matrices = weight_rows(self.weight.shape, shape)
        return launch_norm_act_linear(
            self.x.view(self.rows, d), None if self.w is None else self.w.reshape(-1),
            None if self.b is None else self.b.reshape(-1),
            self.weight if self.weight.dim() == 2 else self.weight.reshape(-1, self.k, d),
            None if self.lb is None else self.lb.reshape(-1), y,
            norm=norm, activation=act, out_activation=out_act, eps=1e-5,
            residual2d=None if self.r is None else self.r.reshape(-1, d), residual_sum=s,
            scale_rows=rows_of(self.w, shape), bias_rows=rows_of(self.b, shape),
            residual_rows=None if self.r is None else rows_of(self.r, shape), weight_rows=matrices,
            linear_bias_rows=rows_of(self.lb, y_shape),
        )  # fmt: skip


def run(case: Case, *, norm=Norm.LAYER, act=Activation.GELU, out_act=Activation.TANH, write_sum=True):
    """Launches ``case`` into NaN-poisoned outputs and checks Y (and the sum) against the reference;
    returns the launch config."""
    rows, d, dtype = case.rows, case.x_shape[-1], case.dtype
    y, y_storage = poisoned((rows, case.k), dtype)
    with_sum = case.r is not None and write_sum
    s, s_storage = poisoned((rows, d), dtype) if with_sum else (None, None)

    config = case.launch(y, s, norm, act, out_act)

    what = f"NormActLinear {list(case.x_shape)} K={case.k} {dtype} {norm.attr} [{config.tier.name}]"
    assert_written(y_storage, rows * case.k, what)
    assert_matches(y, case.reference(norm, act, out_act), dtype, what)
    if with_sum:
        assert_written(s_storage, rows * d, what + " ResidualSum")
        assert_matches(s, f64(case.stored_sum()).reshape(rows, d), dtype, what + " ResidualSum")
    return config


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", list(Norm))
@pytest.mark.parametrize(
    ("x", "expect"),
    [((7, 64), "row_a_s"), ((5, 100), "row_u"), ((3, 8208), "loop_a_s"), ((5, 768), "512+256_w1_exact_a_s")],
)
def test_residual_and_its_sum(dtype, norm, x, expect):
    bias = (x[-1],) if norm is Norm.LAYER else None
    case = Case(x, 4, scale=(x[-1],), bias=bias, residual=x, linear_bias=(4,), dtype=dtype)
    assert run(case, norm=norm).tier.name.endswith(expect)


@pytest.mark.parametrize("x", [(7, 64), (3, 8208), (3, 1280)])
def test_residual_whose_sum_nobody_reads(x):
    run(Case(x, 3, residual=x, linear_bias=(3,)), write_sum=False)


@pytest.mark.parametrize(
    ("x", "residual"),
    [((2, 16, 64), (1, 16, 64)), ((2, 32, 64), (32, 64)), ((4, 3, 128), (4, 1, 128)),
     ((2, 5, 640), (5, 640))],
)  # fmt: skip
def test_broadcast_residual(x, residual):
    run(Case(x, 4, scale=(x[-1],), residual=residual, dtype=torch.bfloat16), act=Activation.SILU)


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_feature_norms_with_a_shared_linear(dtype):
    # The per-feature seed after batching: [N, 1, D] scale and bias on [N, B, D], Linear(D, 1).
    case = Case((32, 3, 64), 1, scale=(32, 1, 64), bias=(32, 1, 64), linear_bias=(1,), dtype=dtype)
    run(case, act=Activation.TANH, out_act=Activation.RELU)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x", "k", "expect"),
    [
        ((6, 3, 64), 4, "row_a"),  # blocks of rows that straddle two features
        ((4, 16, 64), 4, "row_a_b"),  # blocks inside one feature: the blockwise variant
        ((5, 2, 100), 2, "row_u"),
        ((3, 2, 8208), 17, "loop_a_b"),  # more outputs than one accumulated block (one row per block)
    ],
)
def test_per_feature_linear_weights(dtype, x, k, expect):
    n, d = x[0], x[-1]
    case = Case(x, k, scale=(n, 1, d), bias=(n, 1, d), weight=(n, k, d), linear_bias=(n, 1, k), dtype=dtype)
    assert run(case, act=Activation.TANH, out_act=Activation.IDENTITY).tier.name.endswith(expect)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x", "blockwise"),
    [
        ((4, 8, 256), True),  # 8 rows per feature: every block of 4 inside one
        ((4, 6, 256), False),  # 6: a block of 4 would straddle two features
        ((2, 3, 8, 256), True),  # the features are the middle dim: runs of 8 rows
    ],
)
def test_blockwise_variants_where_every_block_lies_inside_one_feature(dtype, x, blockwise):
    """Per-feature norms and weights take the blockwise variant (one operand row per block, four rows
    per program at D = 256) exactly where the rows of a feature come in multiples of its block."""
    n, d = x[-3], x[-1]
    case = Case(x, 4, scale=(n, 1, d), bias=(n, 1, d), weight=(n, 4, d), linear_bias=(n, 1, 4), dtype=dtype)
    tier = run(case, act=Activation.SILU, out_act=Activation.IDENTITY).tier
    assert tier.blockwise == blockwise
    assert (tier.block_m, tier.num_warps) == ((4, 1) if blockwise else (tier.block_m, tier.num_warps))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize(("d", "linear_bias"), [(128, True), (160, False), (256, True)])
def test_every_output_of_blockwise_launches_with_operands_loaded_with_the_row(k, d, linear_bias):
    """fp32 blockwise launches on short rows load scale and bias with the row (no weight row: see
    EARLY_OPERAND_COLS), then write the K outputs one by one: each of them is right."""
    lb = (3, 1, k) if linear_bias else None
    case = Case((3, 8, d), k, scale=(3, 1, d), bias=(3, 1, d), weight=(3, k, d), linear_bias=lb)
    tier = run(case, act=Activation.RELU, out_act=Activation.SIGMOID).tier
    assert tier.blockwise and tier.block_n <= 256


@pytest.mark.parametrize(
    ("x", "weight", "linear_bias"),
    [
        ((4, 3, 32), (4, 2, 32), (2,)),  # per-slice weight, shared bias
        ((4, 3, 32), (2, 32), (4, 1, 2)),  # shared weight, per-slice bias
        ((2, 4, 3, 32), (4, 2, 32), (4, 1, 2)),  # the slices are the inner of two leading dims
    ],
)
def test_weight_and_bias_broadcast_independently(x, weight, linear_bias):
    run(Case(x, weight[-2], weight=weight, linear_bias=linear_bias, scale=(x[-1],)), norm=Norm.RMS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_everything_per_row_at_once(dtype):
    case = Case((6, 5, 96), 3, scale=(6, 1, 96), bias=(6, 1, 96), residual=(5, 96), weight=(6, 3, 96),
                linear_bias=(6, 1, 3), dtype=dtype)  # fmt: skip
    run(case, act=Activation.RELU, out_act=Activation.SIGMOID)


@pytest.mark.parametrize("x", [(3, 4, 96), (2, 2, 8208)])
def test_large_common_offset_with_per_slice_operands(x):
    # Rows 1000 + 0.1 * noise (plus a residual) with scales about 100: statistics taken naively
    # lose the noise's low bits to the offset (see tests/kernels/test_norm_act.py).
    n, d = x[0], x[-1]
    case = Case(x, 3, scale=(n, 1, d), bias=(n, 1, d), residual=x, weight=(n, 3, d), linear_bias=(n, 1, 3),
                mean=1000.0, std=0.1, scale_mean=100.0, scale_std=50.0)  # fmt: skip
    run(case, act=Activation.IDENTITY, out_act=Activation.IDENTITY)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [64, 8208])
def test_a_sum_past_the_top_of_the_type_is_infinite_and_its_row_nan(dtype, cols):
    # Row 0: X at the type's top plus or minus a quarter of it: the stored sum overflows where it is
    # plus (no sum near the boundary, where the interpreter rounds unlike a GPU) and the row is NaN,
    # as the unfused graph's is. Row 1: a sum near the top that stays finite
    # (float16: spread by about 1000, whose squares the fp32 statistics hold; bfloat16, whose every
    # spread that high squares past fp32's range in any implementation: a constant row).
    top = torch.finfo(dtype).max
    case = Case((4, cols), 2, residual=(4, cols), dtype=dtype)
    x, r = case.x.double(), case.r.double()
    x[0], r[0] = top, top / 4 * (torch.arange(cols, dtype=torch.float64) % 2 * 2 - 1)
    spread = 300.0 if dtype == torch.float16 else 0.0
    x[1], r[1] = top / 2 + x[1] * spread, top / 4 + r[1] * spread
    case.x, case.r = x.to(dtype), r.to(dtype)
    y, s = torch.empty(4, 2, dtype=dtype, device=device()), torch.empty(4, cols, dtype=dtype, device=device())

    case.launch(y, s, Norm.LAYER, Activation.IDENTITY, Activation.IDENTITY)

    stored = case.stored_sum()
    assert torch.equal(torch.isinf(s), torch.isinf(stored)) and torch.isinf(s[0]).any()
    assert torch.isnan(y[0]).all()
    assert torch.isfinite(stored[1:]).all() and stored[1].double().abs().min() > top / 2
    ref = NORM_ACT_LINEAR.reference(
        f64(stored[1:]), None, None, f64(case.weight), None,
        norm="layer", activation="identity", epsilon=1e-5, out_activation="identity",
    )  # fmt: skip
    assert_matches(y[1:], ref, dtype, f"NormActLinear {dtype} near the top")
    assert_matches(s[1:], f64(stored[1:]), dtype, f"NormActLinear {dtype} near the top, ResidualSum")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [64, 8208])
def test_nan_and_inf_stay_in_their_rows_and_slices(dtype, cols):
    # X [4, 3, D]: a NaN in row 1, an inf in row 5, and a NaN in the weight matrix of slice 3; each
    # spoils its own rows (the NaN's and inf's, slice 3's three) and no other.
    case = Case((4, 3, cols), 2, scale=(4, 1, cols), weight=(4, 2, cols), linear_bias=(4, 1, 2), dtype=dtype)
    flat = case.x.view(12, cols)
    flat[1, 5], flat[5, 0] = float("nan"), float("inf")
    case.weight[3, 1, 7] = float("nan")
    y, y_storage = poisoned((12, 2), dtype)

    case.launch(y, None, Norm.LAYER, Activation.RELU, Activation.IDENTITY)

    spoiled = torch.zeros(12, dtype=torch.bool)
    spoiled[[1, 5]] = True
    nan_rows = torch.isnan(y.cpu())
    assert nan_rows[[1, 5]].all(), "a NaN or inf row must be NaN, as the unfused graph's is"
    assert nan_rows[9:, 1].all() and not nan_rows[9:, 0].any(), "slice 3's NaN weight row spoils its output 1"
    assert torch.isnan(y_storage[24:]).all(), "wrote past the end"
    keep = ~spoiled & torch.arange(12).lt(9)
    ref = case.reference(Norm.LAYER, Activation.RELU, Activation.IDENTITY)
    assert_matches(y.cpu()[keep], ref[keep.numpy()], dtype, f"NormActLinear {dtype} clean rows")


def test_no_outputs_still_writes_the_residual_sum():
    case = Case((5, 32), 0, residual=(5, 32))
    s, s_storage = poisoned((5, 32), torch.float32)
    case.launch(torch.empty(5, 0, device=device()), s, Norm.RMS, Activation.SILU, Activation.IDENTITY)
    assert_written(s_storage, 5 * 32, "NormActLinear K=0 ResidualSum")
    np.testing.assert_array_equal(f64(s), f64(case.stored_sum()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [64, 8208])
def test_the_norm_reads_the_sum_rounded_to_storage(dtype, cols):
    # X = 1000 and R = 0.05..0.45: stored, the sums take one or two values per row (the storage
    # type's spacing at 1000 is 0.5 or 4), so the rows normalize to +-1 or 0; unrounded they would
    # spread evenly.
    case = Case((4, cols), 3, residual=(4, cols), weight=(3, cols), dtype=dtype)
    ramp = torch.linspace(0.05, 0.45, cols, dtype=torch.float64)
    case.x = torch.full((4, cols), 1000.0, dtype=dtype, device=device())
    case.r = (ramp * torch.tensor([[1.0], [-1.0], [0.5], [0.9]], dtype=torch.float64)).to(dtype).to(device())
    run(case, act=Activation.IDENTITY, out_act=Activation.IDENTITY)
