"""What users of other command lines expect: python -m, --version, versions in the report, -v/-q on
every subcommand (before or after it), --report-json -, and output a pipe gets whole."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import graphopt

import graphopt as package
from graphopt.pipeline import PIPELINE

SEED_MODEL = Path(__file__).resolve().parents[2] / "models" / "split_stack.onnx"


def run_module(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "graphopt", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_python_m_graphopt_and_version():
    result = run_module("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"graphopt {package.__version__}"


def test_the_json_report_records_versions(tmp_path):
    result = graphopt("optimize", SEED_MODEL, "-o", tmp_path / "o.onnx", "--report-json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    versions = json.loads((tmp_path / "r.json").read_text())["versions"]
    import onnx
    import onnxruntime
    import torch

    assert versions["graphopt"] == package.__version__
    assert versions["torch"] == torch.__version__
    assert versions["onnx"] == onnx.__version__
    assert versions["onnxruntime"] == onnxruntime.__version__
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))


def test_report_json_dash_writes_json_alone_to_stdout():
    result = graphopt("optimize", SEED_MODEL, "--dry-run", "--report-json", "-")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["nodes"]["after"] == 2
    assert "fuse_norm_act_linear" in result.stderr and "dry run: nothing written" in result.stderr
    assert not Path("-").exists()


def test_verify_report_json_dash(tmp_path):
    result = graphopt("verify", SEED_MODEL, SEED_MODEL, "--report-json", "-")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    assert verdict["versions"]["graphopt"] == package.__version__
    assert "the models agree" in result.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_says_what_each_pass_did_and_timings(where):
    command = ["optimize", SEED_MODEL, "--dry-run"]
    args = ["-v", *command] if where == "before" else [*command, "-v"]
    result = graphopt(*args)
    assert result.returncode == 0, result.stderr
    assert "batch_split_chains: batch_split_chains × 1; 53 → 7 nodes" in result.stderr
    assert "numeric check: " in result.stderr and " ms" in result.stderr
    assert "near miss" not in result.stderr


def test_debug_level_counts_v_before_and_after_the_subcommand():
    plain = graphopt("optimize", SEED_MODEL, "--dry-run", "-v")
    debug = graphopt("-v", "optimize", SEED_MODEL, "--dry-run", "-v")
    assert plain.returncode == debug.returncode == 0
    assert "DEBUG" not in plain.stderr
    assert "DEBUG graphopt" in debug.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_on_every_subcommand(where, tmp_path):
    commands = {
        "optimize": ["optimize", SEED_MODEL, "-o", tmp_path / "o.onnx"],
        "verify": ["verify", SEED_MODEL, SEED_MODEL],
        "show": ["show", SEED_MODEL, "-o", tmp_path / "p.svg", "--engine", "matplotlib"],
    }
    for name, command in commands.items():
        args = ["-q", *command] if where == "before" else [*command, "-q"]
        result = graphopt(*args)
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout == "" and result.stderr == "", name
    passes = graphopt(*(["-q", "passes"] if where == "before" else ["passes", "-q"]))
    assert passes.stdout.split()[:2] == [p.name for p in PIPELINE[:2]]


def test_bench_takes_the_same_options(tmp_path):
    result = graphopt("bench", SEED_MODEL.with_suffix(".pt2"), "-v", "-q", "--out", tmp_path)
    assert "No such option" not in result.stderr
    assert result.returncode in (0, 2)  # (2 on a machine without a GPU: it says so in one line)


def test_piped_output_is_not_cut_at_80_columns(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = run_module("optimize", SEED_MODEL, "-o", tmp_path / "o.onnx", env=env)
    assert result.returncode == 0, result.stderr
    assert "eliminate_common_subexpressions" in result.stdout
    assert "fuse_norm_act_matmul_bias_act" in result.stdout
    assert "…" not in result.stdout
    assert f"graphopt: {SEED_MODEL}" in result.stdout.splitlines()
