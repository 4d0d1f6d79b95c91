import json
import subprocess
import sys
from pathlib import Path

import onnx

SEED_MODEL = Path(__file__).resolve().parents[2] / "models" / "split_stack.onnx"


def graphopt(*args):
    return subprocess.run(
        [sys.executable, "-m", "graphopt.cli", *map(str, args)], capture_output=True, text=True, timeout=600
    )


def copy_seed(tmp_path):
    model = tmp_path / "split_stack.onnx"
    model.write_bytes(SEED_MODEL.read_bytes())
    return model


def test_optimize_writes_beside_the_input_and_reports(tmp_path):
    model = copy_seed(tmp_path)
    result = graphopt("optimize", model, "--report-json", tmp_path / "report.json")
    assert result.returncode == 0, result.stderr
    written = tmp_path / "split_stack.opt.onnx"
    assert written.is_file()
    assert model.read_bytes() == SEED_MODEL.read_bytes()
    ops = [n.op_type for n in onnx.load(str(written)).graph.node]
    assert ops == ["Reshape", "NormActLinear"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["nodes"] == {"before": 69, "after": 2}
    assert report["verification"]["ok"] is True
    counts = {p["name"]: p["counts"] for p in report["passes"]}
    assert counts["batch_split_chains"] == {"batch_split_chains": 1}
    assert "batch_split_chains" in result.stdout and "numeric check" in result.stdout


def test_dry_run_writes_nothing(tmp_path):
    model = copy_seed(tmp_path)
    result = graphopt("optimize", model, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split_stack.onnx"]
    assert "dry run: nothing written" in result.stdout


def test_only_runs_just_the_named_passes(tmp_path):
    model = copy_seed(tmp_path)
    result = graphopt(
        "optimize", model, "--only", "fold_shape_inputs,remove_dead_nodes", "-o", tmp_path / "o.onnx"
    )
    assert result.returncode == 0, result.stderr
    ops = [n.op_type for n in onnx.load(str(tmp_path / "o.onnx")).graph.node]
    assert ops.count("LayerNormalization") == 16


def test_passes_and_version():
    listing = graphopt("passes")
    assert listing.returncode == 0
    for name in ("batch_split_chains", "fuse_norm_act", "remove_dead_nodes"):
        assert name in listing.stdout
    version = graphopt("--version")
    assert version.returncode == 0 and version.stdout.startswith("graphopt ")
