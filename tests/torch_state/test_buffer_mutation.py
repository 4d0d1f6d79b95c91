"""Programs that update a buffer: optimizing leaves the caller's program as it was, the optimized
program has a buffer of its own, and it updates it as the original does, call after call."""

import warnings

import pytest
import torch
from torch import nn

import graphopt


class Counter(nn.Module):
    """Counts its calls in a buffer and scales a fusable norm → tanh by the count."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return torch.tanh(self.norm(x)) * (self.count * 2)


def _program(form: str) -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(Counter().eval(), (torch.randn(3, 8),))
        return program.run_decompositions() if form == "functional" else program


def _calls(module, count=3):
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return [module(x) for _ in range(count)]


@pytest.mark.parametrize("form", ["in_place", "functional"])
def test_optimizing_leaves_the_callers_program_unchanged_and_checks_clean(form):
    program = _program(form)
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    assert program.state_dict["count"].item() == 0
    assert optimized.state_dict["count"].data_ptr() != program.state_dict["count"].data_ptr()
    assert any(getattr(n.target, "namespace", None) == "graphopt" for n in optimized.graph.nodes)


@pytest.mark.parametrize("form", ["in_place", "functional"])
def test_the_optimized_program_updates_its_buffer_as_the_original_does(form):
    program = _program(form)
    optimized, _ = graphopt.optimize(program)
    module = optimized.module()
    got, want = _calls(module), _calls(_program(form).module())
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert module.count.item() == 3
    assert optimized.module().count.item() == 3  # the program's own buffer, which its modules share
    assert program.state_dict["count"].item() == 0
