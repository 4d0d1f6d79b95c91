import pytest
import torch

from models import zoo


def _param(entry):
    marks = [pytest.mark.slow] if "aten_decomposed" in entry.tags else []
    return pytest.param(entry, id=entry.name, marks=marks)


ENTRIES = [_param(e) for e in zoo.exported_programs()]


def _outputs(program: torch.export.ExportedProgram, args) -> list[torch.Tensor]:
    out = program.module()(*args)
    return list(out) if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize("entry", ENTRIES)
def test_builds_and_matches_eager(entry):
    program = entry.build()
    assert isinstance(program, torch.export.ExportedProgram)
    for got, want in zip(_outputs(program, entry.inputs()), entry.expected(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# Saving is format plumbing: one entry per feature the archive has to carry is enough.
ROUND_TRIP = [
    "split_stack.export",
    "split_stack.export_decomposed",
    "buffers.export",
    "mlp_dynamic_batch.export",
    "cond.export",
    "conv_bn.export_decomposed",
]


@pytest.mark.parametrize("entry", [zoo.get(name) for name in ROUND_TRIP], ids=ROUND_TRIP)
def test_save_and_load_round_trip(entry, tmp_path):
    path = entry.save(tmp_path)
    loaded = torch.export.load(path)
    args = entry.inputs()
    for got, want in zip(_outputs(loaded, args), _outputs(entry.build(), args), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def _targets(program: torch.export.ExportedProgram) -> set[str]:
    return {str(n.target) for n in program.graph.nodes if n.op == "call_function"}


def test_decomposition_changes_the_seed_ops():
    exported = _targets(zoo.get("split_stack.export").build())
    decomposed = _targets(zoo.get("split_stack.export_decomposed").build())
    assert {"aten.split.Tensor", "aten.layer_norm.default", "aten.stack.default"} <= exported
    assert {
        "aten.split_with_sizes.default",
        "aten.native_layer_norm.default",
        "aten.cat.default",
    } <= decomposed


def test_buffers_entry_keeps_a_non_persistent_buffer_as_a_constant():
    program = zoo.get("buffers.export").build()
    assert "scale" in program.state_dict
    assert "offset" in program.constants


@pytest.mark.slow
def test_dynamic_batch_program_accepts_other_batches():
    program = zoo.get("mlp_dynamic_batch.export").build()
    assert program.module()(torch.ones(9, 16)).shape == (9, 8)
