import io

import pytest
import torch
import torch_programs as tp

import graphopt
from graphopt.analysis import verify
from graphopt.backends.torch_export import to_exported_program
from graphopt.frontends.torch_export import from_exported_program
from graphopt.pipeline import pass_names

CASES = [(name, form) for name in tp.SPECS for form in ("exported", "decomposed")]


def _ids(case):
    return f"{case[0]}-{case[1]}"


@pytest.fixture(params=CASES, ids=_ids)
def case(request):
    return request.param


def _round_trip(program):
    graph = from_exported_program(program)
    verify(graph)
    return to_exported_program(graph)


def _assert_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g, w)


def test_round_trip_without_passes_writes_the_same_program(case):
    program = tp.program(*case)
    rebuilt = _round_trip(program)
    assert rebuilt.graph_module.code == program.graph_module.code
    assert rebuilt.graph_signature == program.graph_signature
    assert rebuilt.range_constraints == program.range_constraints
    assert set(rebuilt.state_dict) == set(program.state_dict)
    assert set(rebuilt.constants) == set(program.constants)
    spec = tp.SPECS[case[0]]
    inputs = spec.inputs(seed=7, batch=5)
    _assert_equal(tp.outputs(rebuilt, inputs), tp.outputs(program, inputs))


def test_round_trip_survives_save_and_load(case):
    program = tp.program(*case)
    buffer = io.BytesIO()
    torch.export.save(_round_trip(program), buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    inputs = tp.SPECS[case[0]].inputs(seed=3)
    _assert_equal(tp.outputs(loaded, inputs), tp.outputs(program, inputs))


def test_optimize_with_every_pass_skipped_returns_an_equal_program(case):
    program = tp.program(*case)
    optimized, report = graphopt.optimize(program, skip=pass_names())
    assert isinstance(optimized, torch.export.ExportedProgram)
    assert report.verification["ok"]
    assert optimized.graph_module.code == program.graph_module.code


def test_the_full_pipeline_keeps_the_outputs(case):
    program = tp.program(*case)
    optimized, report = graphopt.optimize(program, check_each_pass=True)
    assert report.verification["ok"], report.verification["summary"]
    assert report.frontend == "torch"
    spec = tp.SPECS[case[0]]
    inputs = spec.inputs(seed=11, batch=6)
    for got, want in zip(tp.outputs(optimized, inputs), tp.outputs(program, inputs), strict=True):
        tolerance = 2e-2 if want.dtype == torch.bfloat16 else 1e-4
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


def test_dynamic_batch_stays_dynamic_after_the_pipeline():
    program = tp.program("mlp_dynamic_batch", "exported")
    optimized, _ = graphopt.optimize(program)
    assert optimized.range_constraints == program.range_constraints
    (x,) = optimized.graph.find_nodes(op="placeholder")[-1:]
    assert not isinstance(x.meta["val"].shape[0], int)
    for batch in (2, 9):
        inputs = tp.SPECS["mlp_dynamic_batch"].inputs(seed=batch, batch=batch)
        torch.testing.assert_close(tp.outputs(optimized, inputs), tp.outputs(program, inputs))


class _EmptyConstant(torch.nn.Module):
    """An empty constant that folds (``detach``) and stays an operand (``cat``), as the rotary code of
    some decoders (StableLM, GPT-J) writes ``torch.tensor([])``."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        empty = torch.tensor([], dtype=self.dtype)
        return torch.cat([x, empty.detach()]) * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_a_folded_empty_constant_saves_and_loads(dtype):
    x = torch.arange(5).to(dtype)
    program = torch.export.export(_EmptyConstant(dtype), (x,))
    optimized, _ = graphopt.optimize(program)
    assert "folded" in optimized.graph_module.code  # (the empty constant was folded, so this tests it)
    buffer = io.BytesIO()
    torch.export.save(optimized, buffer)  # failed: "numel: integer multiplication overflow"
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    _assert_equal([loaded.module()(x)], [_EmptyConstant(dtype)(x)])
