import io
import subprocess
import sys
import zipfile

import pytest
import torch
import torch_programs as tp
from typer.testing import CliRunner

from graphopt.cli import app


@pytest.fixture(scope="module")
def archive_bytes() -> bytes:
    buffer = io.BytesIO()
    torch.export.save(tp.program("split_stack", "exported"), buffer)
    return buffer.getvalue()


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _flip_graph_bytes(data: bytes) -> bytes:
    """Flips bytes inside the serialized graph (stored uncompressed), which its checksum then misses."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("models/model.json"))
    header = info.header_offset
    start = header + 30 + int.from_bytes(data[header + 26 : header + 28], "little")
    start += int.from_bytes(data[header + 28 : header + 30], "little")
    flipped = bytearray(data)
    for i in range(start + 10, start + 14):
        flipped[i] ^= 0xFF
    return bytes(flipped)


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _checkpoint() -> bytes:
    buffer = io.BytesIO()
    torch.save({"weight": torch.ones(2)}, buffer)
    return buffer.getvalue()


BAD = {
    "not_a_zip": (lambda good: b"definitely not a zip archive", "not a zip file"),
    "empty": (lambda good: b"", "is empty (0 bytes)"),
    "zip_of_text": (lambda good: _zip({"notes.txt": b"hello"}), "without a torch.export archive"),
    "torch_save_checkpoint": (lambda good: _checkpoint(), "without a torch.export archive"),
    "archive_without_program": (
        lambda good: _zip({"m/archive_format": b"pt2", "m/archive_version": b"0"}),
        "without an exported program",
    ),
    "truncated": (lambda good: good[: len(good) // 2], "not a zip file"),
    "bit_flipped": (_flip_graph_bytes, "fails its checksum"),
}


@pytest.mark.parametrize("case", BAD, ids=str)
def test_bad_archive_is_one_line_exit_2_nothing_written(case, archive_bytes, tmp_path):
    make, expected = BAD[case]
    path = tmp_path / "model.pt2"
    path.write_bytes(make(archive_bytes))
    result = _cli("optimize", path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphopt: error: "), result.stderr
    assert str(path) in lines[0] and expected in lines[0]
    assert "Traceback" not in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt2"]


def test_missing_archive(tmp_path):
    result = _cli("optimize", tmp_path / "absent.pt2")
    assert result.exit_code == 2 and "no such file" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_optimize_writes_an_optimized_archive_beside_the_input(archive_bytes, tmp_path):
    model = tmp_path / "model.pt2"
    model.write_bytes(archive_bytes)
    result = _cli("optimize", model, "-q")
    assert result.exit_code == 0, result.output
    written = tmp_path / "model.opt.pt2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.opt.pt2", "model.pt2"]
    assert model.read_bytes() == archive_bytes
    optimized = torch.export.load(written)
    x = tp.SPECS["split_stack"].inputs(seed=5)
    original = tp.program("split_stack", "exported")
    torch.testing.assert_close(tp.outputs(optimized, x), tp.outputs(original, x), rtol=1e-4, atol=1e-5)
    assert any(str(n.target).startswith("graphopt.") for n in optimized.graph.nodes)


def test_a_fresh_process_optimizes_an_archive_holding_graphopt_ops(archive_bytes, tmp_path):
    """Loading registers torch.ops.graphopt.* first, so fused programs load where nothing else did."""
    model = tmp_path / "model.pt2"
    model.write_bytes(archive_bytes)
    assert _cli("optimize", model, "-q", "-o", tmp_path / "fused.pt2").exit_code == 0
    command = ["optimize", "-q", tmp_path / "fused.pt2", "-o", tmp_path / "again.pt2"]
    result = subprocess.run(
        [sys.executable, "-m", "graphopt.cli", *command], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (tmp_path / "again.pt2").is_file()


def test_optimize_returns_the_program_and_the_report():
    import graphopt

    program = tp.program("split_stack", "decomposed")
    optimized, report = graphopt.optimize(program)
    assert isinstance(optimized, torch.export.ExportedProgram)
    assert report.frontend == "torch" and report.verification["ok"]
    assert report.ops_after != report.ops_before
