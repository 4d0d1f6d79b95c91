import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from models import bad_inputs

SEED_MODEL = Path(__file__).resolve().parents[2] / "models" / "split_stack.onnx"


def graphopt(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "graphopt.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def assert_bad_input(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("graphopt: error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


BAD_ONNX = [bad for bad in bad_inputs.BAD_INPUTS if bad.filename.endswith(".onnx")]
EXPECTED = {
    "empty": "is empty (0 bytes)",
    "random_bytes": "not an ONNX model",
    "truncated": "not an ONNX model",
    "tensor_not_model": "not an ONNX model",
    "cycle": "cycle",
    "undefined_input": "which no node, input or initializer defines",
    "duplicate_producer": "defined twice",
    "opset_too_new": "opset 99",
}


@pytest.mark.parametrize("bad", BAD_ONNX, ids=lambda b: b.name)
def test_bad_onnx_input_is_one_line_exit_2_nothing_written(bad, tmp_path):
    path = bad.write(tmp_path)
    before = sorted(tmp_path.iterdir())
    result = graphopt("optimize", path)
    assert_bad_input(result, str(path), EXPECTED[bad.name])
    assert sorted(tmp_path.iterdir()) == before


def test_missing_file(tmp_path):
    assert_bad_input(graphopt("optimize", tmp_path / "nope.onnx"), "no such file")
    assert list(tmp_path.iterdir()) == []


def test_directory(tmp_path):
    assert_bad_input(graphopt("optimize", tmp_path), "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_unknown_pass_lists_the_valid_ones(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(SEED_MODEL.read_bytes())
    result = graphopt("optimize", model, "--skip", "fuse_everything")
    assert_bad_input(result, "unknown pass 'fuse_everything'", "batch_split_chains", "fuse_norm_act")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_refuses_to_overwrite_the_input(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(SEED_MODEL.read_bytes())
    result = graphopt("optimize", model, "-o", model)
    assert_bad_input(result, "refusing to overwrite the input")
    assert model.read_bytes() == SEED_MODEL.read_bytes()


def test_bad_input_shape_option(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(SEED_MODEL.read_bytes())
    assert_bad_input(graphopt("optimize", model, "--input-shape", "x:1xq"), "expected NAME:DIMxDIM")


def test_an_input_shape_for_no_input_of_the_model_or_of_another_rank(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(SEED_MODEL.read_bytes())
    name = onnx.load(model).graph.input[0].name

    unknown = graphopt("optimize", model, "-o", tmp_path / "a.onnx", "--input-shape", "foo:1x2")
    rank = graphopt("optimize", model, "-o", tmp_path / "b.onnx", "--input-shape", f"{name}:2x3")

    assert_bad_input(unknown, "--input-shape names 'foo', which is not an input of the model", repr(name))
    assert_bad_input(rank, f"gives input {name!r} 2 dims (2x3); the model declares 1")
    assert not (tmp_path / "a.onnx").exists() and not (tmp_path / "b.onnx").exists()
