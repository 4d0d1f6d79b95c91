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


def test_a_program_that_writes_in_place_has_no_float64_evaluation():
    program = torch.export.export(Accumulates(), (torch.zeros(4),))
    assert float64_outputs(program, [{"x": np.ones(4, np.float32)}]) is None


def test_a_program_with_more_weights_than_the_limit_has_no_float64_evaluation(monkeypatch):
    """Each evaluation holds a float64 copy of every weight, as for ONNX models."""
    from graphopt.frontends import torch_float64

    program = torch.export.export(SumThenSquare(), (torch.zeros(4, dtype=torch.float16),))
    feeds = [{"x": np.ones(4, np.float16)}]
    monkeypatch.setattr(torch_float64, "MAX_WEIGHT_BYTES", 8)
    assert float64_outputs(program, feeds) is not None
    monkeypatch.setattr(torch_float64, "MAX_WEIGHT_BYTES", 7)
    assert float64_outputs(program, feeds) is None
