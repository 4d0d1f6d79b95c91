"""Tensors the passes compute once from parameters (a position-embedding lookup by a constant index)
stay parameters, are made once however often they are computed, and the report says why the number
of parameter values changed where it did."""

import warnings

import torch
from torch import nn
from torch.export.graph_signature import InputKind

import graphopt


class Positions(nn.Module):
    """Adds the embeddings of positions 0..5, looked up twice (as a model reading them in two layers)."""

    def __init__(self, positions: int = 6, dim: int = 4, repeat: bool = False):
        super().__init__()
        self.position = nn.Embedding(positions, dim)
        self.repeat = repeat

    def forward(self, x):
        ids = torch.arange(x.shape[1])
        if self.repeat:
            ids = torch.zeros(3, x.shape[1], dtype=torch.long)  # row 0, three times per position
        return torch.tanh(x + self.position(ids)) + self.position(ids)


def _optimized(repeat: bool):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(Positions(repeat=repeat).eval(), (torch.randn(3, 6, 4),))
    return program, *graphopt.optimize(program)


def _parameters(program) -> dict:
    return {s.target: program.state_dict[s.target] for s in program.graph_signature.input_specs
            if s.kind == InputKind.PARAMETER}  # fmt: skip


def test_a_lookup_of_the_whole_table_folded_twice_is_the_table_itself():
    program, optimized, report = _optimized(repeat=False)
    assert report.verification["ok"]
    (kept,) = _parameters(optimized).values()
    assert kept.data_ptr() == program.state_dict["position.weight"].data_ptr()
    assert sum(p.numel() for p in optimized.parameters()) == sum(p.numel() for p in program.parameters())
    assert not any("parameter values" in note for note in report.notes)


def test_a_lookup_folded_twice_into_more_values_than_its_table_is_one_parameter_and_reported():
    _, optimized, report = _optimized(repeat=True)
    assert report.verification["ok"]
    (made,) = _parameters(optimized)
    assert made == "position.weight_fused" and optimized.state_dict[made].shape == (3, 6, 4)
    assert report.notes[-1] == (
        "the optimized program holds 72 parameter values, the original 24: computed once from parameters "
        "into more values than they hold: position.weight_fused"
    )


def test_a_lookup_folded_into_fewer_values_than_its_table_says_why():
    torch.manual_seed(0)
    module = Positions(positions=64).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(module, (torch.randn(3, 6, 4),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"]
    (made,) = _parameters(optimized)
    assert optimized.state_dict[made].shape == (6, 4)
    assert report.notes[-1] == (
        "the optimized program holds 24 parameter values, the original 256: computed once from parameters "
        f"into fewer values than they hold (the part the program reads): {made}"
    )
