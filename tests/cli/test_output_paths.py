"""Outputs graphopt must not or cannot write are refused before any work, with one line and exit 2:
files the input reads, a directory, a read-only file system, a full disk, a mismatched extension."""

import json
import os
from pathlib import Path

import pytest
from cli_run import assert_bad_input, graphopt, graphopt_process
from written_files import external_weights_model, files_left, graphopt_in_tmpfs, private_mounts_work

SEED_MODEL = Path(__file__).resolve().parents[2] / "models" / "split_stack.onnx"
SEED_PT2 = SEED_MODEL.with_suffix(".pt2")
needs_mounts = pytest.mark.skipif(not private_mounts_work(), reason="cannot mount a private tmpfs here")


def folder_state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def external(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    return external_weights_model(folder)


def test_the_inputs_weights_file_is_not_an_output(external):
    before = folder_state(external.parent)
    assert_bad_input(graphopt("optimize", external, "-o", external.parent / "weights.bin"))
    assert folder_state(external.parent) == before


def test_an_output_named_like_the_inputs_weights_is_refused(tmp_path):
    external = external_weights_model(tmp_path, data_name="w.onnx")
    before = folder_state(tmp_path)
    result = graphopt("optimize", external, "-o", tmp_path / "w.onnx")
    assert_bad_input(result, "the output", "the input reads its weights from it")
    assert folder_state(tmp_path) == before


def test_the_outputs_data_file_may_not_be_the_inputs_weights(tmp_path):
    external = external_weights_model(tmp_path, data_name="out.onnx.data")
    before = folder_state(tmp_path)
    result = graphopt("optimize", external, "-o", tmp_path / "out.onnx")
    assert_bad_input(result, "the output's data file", "the input reads its weights from it")
    assert folder_state(tmp_path) == before


def test_the_report_may_not_overwrite_what_the_input_reads(external):
    before = folder_state(external.parent)
    out = external.parent.parent / "out.onnx"
    result = graphopt("optimize", external, "-o", out, "--report-json", external.parent / "weights.bin")
    assert_bad_input(result, "--report-json", "the input reads its weights from it")
    assert folder_state(external.parent) == before
    assert not out.exists()


def test_a_model_with_external_weights_is_written_with_its_own(external, tmp_path):
    out = tmp_path / "o" / "out.onnx"
    assert graphopt("optimize", external, "-o", out).returncode == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.onnx", "out.onnx.data"]


@pytest.mark.parametrize(
    ("model", "output", "expected"),
    [(SEED_MODEL, "out.pt2", "expected a .onnx file"), (SEED_PT2, "out.onnx", "expected a .pt2 file"),
     (SEED_MODEL, "out", "a name without an extension")],
)  # fmt: skip
def test_the_extension_must_match_the_format(model, output, expected, tmp_path):
    result = graphopt("optimize", model, "-o", tmp_path / output)
    assert_bad_input(result, expected)
    assert list(tmp_path.iterdir()) == []


def test_an_output_that_is_a_directory(tmp_path):
    (tmp_path / "out.onnx").mkdir()
    assert_bad_input(graphopt("optimize", SEED_MODEL, "-o", tmp_path / "out.onnx"), "is a directory")
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]


@pytest.mark.parametrize("report", ["a_directory", "a_file/report.json"])
def test_an_unwritable_report_is_refused_before_any_work(report, tmp_path):
    (tmp_path / "a_directory").mkdir()
    (tmp_path / "a_file").write_text("")
    result = graphopt_process(
        "optimize", SEED_MODEL, "-o", tmp_path / "out.onnx", "--report-json", tmp_path / report
    )
    assert_bad_input(result, "--report-json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_directory", "a_file"]


@needs_mounts
def test_a_read_only_file_system(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    result = graphopt_in_tmpfs(out, "ro,size=64k", "optimize", SEED_MODEL, "-o", out / "m.onnx")
    assert_bad_input(result, "read-only")
    assert files_left(result) == []


@needs_mounts
def test_a_full_disk(tmp_path):
    """The model (64 KiB of weights) does not fit; nothing is left behind, the message is one line."""
    external = external_weights_model(tmp_path)
    out = tmp_path / "full"
    out.mkdir()
    result = graphopt_in_tmpfs(out, "size=32k", "optimize", external, "-o", out / "m.onnx")
    assert_bad_input(result, f"cannot write {out / 'm.onnx'}: no space left on the device")
    assert files_left(result) == []


@needs_mounts
def test_a_report_that_does_not_fit(tmp_path):
    out = tmp_path / "full"
    out.mkdir()
    args = ["optimize", SEED_MODEL, "-o", tmp_path / "m.onnx", "--report-json", out / "r.json"]
    result = graphopt_in_tmpfs(out, "size=4k", "--quiet", *args, "--no-verify")
    if result.returncode == 0:
        pytest.skip("the report fitted into one page")
    assert_bad_input(result, "no space left on the device")
    assert files_left(result) == []


def test_written_files_honour_the_umask(external, tmp_path):
    for umask, mode in ((0o022, 0o644), (0o077, 0o600)):
        out = tmp_path / f"umask{umask:o}"
        old = os.umask(umask)
        try:
            result = graphopt_process(
                "optimize", external, "-o", out / "m.onnx", "--report-json", out / "r.json"
            )
        finally:
            os.umask(old)
        assert result.returncode == 0, result.stderr
        modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
        assert modes == {"m.onnx": mode, "m.onnx.data": mode, "r.json": mode}
        assert json.loads((out / "r.json").read_text())["output"] == str(out / "m.onnx")
