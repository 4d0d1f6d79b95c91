import numpy as np
import torch

from graphopt.frontends.torch_float64 import float64_outputs
from graphopt.verification.stored_rounding import EXACT, MODES, STORED


class SumThenSquare(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("r", torch.full((4,), 0.3, dtype=torch.float16))

    def forward(self, x):
        s = x + self.r
        return s * s


def test_each_value_is_stored_in_its_dtype_or_not_at_all():
    program = torch.export.export(SumThenSquare(), (torch.zeros(4, dtype=torch.float16),))
    x = np.full(4, 100.0, np.float16)
    [runs] = float64_outputs(program, [{"x": x}])
    assert set(runs) == set(MODES)
    r = float(np.float16(0.3))
    np.testing.assert_array_equal(runs[EXACT][0], np.full(4, (100.0 + r) ** 2))
    stored = float(np.float16(np.float16(100.0 + r) ** 2))
    np.testing.assert_array_equal(runs[STORED][0], np.full(4, stored))
    ran = program.module()(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(ran, np.full(4, stored, np.float16))


class Accumulates(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.total.add_(x)
        return x * 2


def test_a_program_that_updates_its_state_in_place_is_evaluated_on_copies():
    module = Accumulates()
    program = torch.export.export(module, (torch.zeros(4),))
    [runs] = float64_outputs(program, [{"x": np.ones(4, np.float32)}])
    np.testing.assert_array_equal(runs[EXACT][0], np.full(4, 2.0))
    assert torch.equal(program.state_dict["total"], torch.zeros(4))  # (the program's own state untouched)


def test_a_program_with_more_weights_than_the_limit_has_no_float64_evaluation(monkeypatch):
    """Each evaluation holds a float64 copy of every weight, as for ONNX models."""
    from graphopt.frontends import torch_float64

    program = torch.export.export(SumThenSquare(), (torch.zeros(4, dtype=torch.float16),))
    feeds = [{"x": np.ones(4, np.float16)}]
    monkeypatch.setattr(torch_float64, "MAX_WEIGHT_BYTES", 8)
    assert float64_outputs(program, feeds) is not None
    monkeypatch.setattr(torch_float64, "MAX_WEIGHT_BYTES", 7)
    assert float64_outputs(program, feeds) is None


class CastsToItsDtype(torch.nn.Module):
    """A bfloat16 model that calls .to(dtype) (RMSNorm-style upcast and back): the trace leaves checks
    of each cast's dtype, which must not stop the float64 evaluation (they compare with bfloat16)."""

    def forward(self, x):
        wide = x.to(torch.float32)
        return (wide * torch.rsqrt((wide * wide).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def test_dtype_checks_of_a_16_bit_program_do_not_stop_its_float64_evaluation():
    program = torch.export.export(CastsToItsDtype(), (torch.ones(2, 8, dtype=torch.bfloat16),))
    checks = [n for n in program.graph.nodes if "assert_tensor_metadata" in str(n.target)]
    assert checks, "the trace no longer checks the casts' dtypes: this test no longer tests them"
    x = np.linspace(-3.0, 3.0, 16).reshape(2, 8).astype(np.float32)
    x16 = torch.from_numpy(x).to(torch.bfloat16)
    [runs] = float64_outputs(program, [{"x": x16.to(torch.float32).numpy().astype(np.float64)}])
    exact = x16.double().numpy()
    exact = exact / np.sqrt((exact * exact).mean(-1, keepdims=True) + 1e-6)
    # (the program's last cast is its own: even the unrounded evaluation ends in bfloat16)
    np.testing.assert_allclose(runs[EXACT][0], exact, rtol=2**-8)
    ran = program.module()(x16).double().numpy()
    np.testing.assert_allclose(runs[STORED][0], ran, rtol=2**-8)


class UpdatesInPlace(torch.nn.Module):
    """A residual block as transformers' ResNet writes it: ``hidden += residual`` on a value the forward
    computed. ``read_after``: the updated value's old name is read again afterwards; ``view``: the
    update goes through a view of it (and shows through its base)."""

    def __init__(self, read_after=False, view=False):
        super().__init__()
        self.read_after, self.view = read_after, view

    def forward(self, x, r):
        hidden = x * 3.0
        target = hidden.view(-1) if self.view else hidden
        target += r.reshape(target.shape)
        return hidden * 2.0 + (hidden if self.read_after else 0.0)


def _in_place_program(**kind):
    args = (torch.zeros(2, 4), torch.zeros(2, 4))
    program = torch.export.export(UpdatesInPlace(**kind), args)
    assert any(str(n.target).startswith("aten.add_") for n in program.graph.nodes), "no in-place update left"
    return program


def test_an_in_place_update_of_a_computed_value_is_evaluated():
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 7
    r = np.full((2, 4), 0.1, np.float32)
    updated = x.astype(np.float64) * 3 + np.float64(np.float32(0.1))
    [runs] = float64_outputs(_in_place_program(), [{"x": x, "r": r}])
    np.testing.assert_allclose(runs[EXACT][0], updated * 2)
    # (a later read of the updated value is traced as a read of the update's result)
    [runs] = float64_outputs(_in_place_program(read_after=True), [{"x": x, "r": r}])
    np.testing.assert_allclose(runs[EXACT][0], updated * 3)


def test_an_in_place_update_through_a_view_shows_in_its_base():
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 7
    r = np.full((2, 4), 0.1, np.float32)
    [runs] = float64_outputs(_in_place_program(view=True), [{"x": x, "r": r}])
    exact = (x.astype(np.float64) * 3 + np.float64(np.float32(0.1))) * 2
    for mode in (EXACT, STORED):  # (stored: every value its own float32 copy but views and updates)
        np.testing.assert_allclose(runs[mode][0], exact, rtol=1e-6)


class MaskedBySlices(torch.nn.Module):
    """A mask built as Swin builds its shifted-window mask and BEiT its position table: fill_ and copy_
    into slices of a tensor the forward made, then read through the whole tensor."""

    def forward(self, x):
        mask = torch.zeros(x.shape[-1], dtype=x.dtype)
        mask[:2] = -100.0
        mask[-1:] = x[0, :1] * 3
        return x + mask


def test_writes_into_slices_of_a_computed_tensor_are_seen_through_it():
    program = torch.export.export(MaskedBySlices(), (torch.zeros(2, 4),))
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 7
    [runs] = float64_outputs(program, [{"x": x}])
    mask = np.array([-100.0, -100.0, 0.0, np.float64(x[0, 0]) * 3])
    for mode in (EXACT, STORED):
        np.testing.assert_allclose(runs[mode][0], x.astype(np.float64) + mask, rtol=1e-6)


class UpdatesA16BitValue(torch.nn.Module):
    def forward(self, x, r):
        hidden = x * 3.0
        hidden += r
        return hidden * 3.0


def test_an_in_place_update_is_stored_in_its_dtype():
    """The update's result rounded to bfloat16 in place, as the program's memory holds it: the
    evaluation as stored matches the program exactly."""
    args = (torch.zeros(64, dtype=torch.bfloat16), torch.zeros(64, dtype=torch.bfloat16))
    program = torch.export.export(UpdatesA16BitValue(), args)
    x = torch.linspace(-3, 3, 64).to(torch.bfloat16)
    r = torch.full((64,), 0.0123).to(torch.bfloat16)
    feeds = {"x": x.float().numpy(), "r": r.float().numpy()}
    [runs] = float64_outputs(program, [feeds])
    ran = program.module()(x, r).double().numpy()
    np.testing.assert_array_equal(runs[STORED][0], ran)
    assert not np.array_equal(runs[EXACT][0], ran)  # (the exact answer is not rounded)


class ScalarConstants(torch.nn.Module):
    """0-d tensor constants, detached in place and filled into a slice (DeBERTa's and Swin's traces
    hold such nodes): each stored value is a tensor of its own shape, not a view or a 1-d copy."""

    def forward(self, x):
        mask = torch.zeros(x.shape[-1], dtype=x.dtype)
        mask[:2] = torch.tensor(-100.0)
        c = torch.tensor(3.0)
        c.detach_()
        return x + mask * c


def test_scalar_constants_detached_and_filled_in_place():
    program = torch.export.export(ScalarConstants(), (torch.zeros(2, 4),))
    [runs] = float64_outputs(program, [{"x": np.ones((2, 4), np.float32)}])
    for mode in (EXACT, STORED):
        np.testing.assert_array_equal(runs[mode][0], np.array([[-299.0, -299.0, 1.0, 1.0]] * 2))


class WindowMask(torch.nn.Module):
    """Swin's shifted-window mask: region counts filled into slices, windows compared with 0, -100
    where they differ. Filled values are made, not computed: with rounding noise on them, equal
    counts differed, whole windows flipped between masked and not, and a noisy evaluation of the
    original strayed from the exact answer by the output's own size."""

    def forward(self, x):
        regions = torch.zeros(12, dtype=x.dtype)
        for count, (start, stop) in enumerate(((0, 5), (5, 9), (9, 12))):
            regions[start:stop] = torch.tensor(float(count + 3))
        windows = regions.view(3, 4)
        mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0)
        return torch.softmax(x + mask, dim=-1)


def test_made_values_get_no_rounding_noise():
    program = torch.export.export(WindowMask(), (torch.zeros(3, 4, 4),))
    x = np.random.default_rng(0).standard_normal((3, 4, 4)).astype(np.float32)
    [runs] = float64_outputs(program, [{"x": x}])
    for mode in MODES:
        np.testing.assert_allclose(runs[mode][0], runs[EXACT][0], atol=1e-6, err_msg=f"mode {mode}")
