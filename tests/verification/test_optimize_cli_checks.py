import json

import numpy as np
import onnx
import pytest
from broken_pass import RULE, tanh_chain
from cli_run import assert_bad_input, graphopt, graphopt_process


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(tanh_chain(batch="batch"), str(path))
    return path


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_mismatch_exits_1_names_the_rewrite_writes_the_report_and_no_model(broken_pipeline, model, tmp_path):
    report = tmp_path / "report.json"
    result = graphopt("optimize", model, "--report-json", report)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"first wrong rewrite: rule {RULE} at node 't3'" in result.stderr
    assert "nothing written (use --force to write anyway)" in result.stderr
    assert _files(tmp_path) == ["m.onnx", "report.json"]
    culprit = json.loads(report.read_text())["verification"]["culprit"]
    assert (culprit["pass"], culprit["rule"], culprit["node"]) == ("rewrite_tanh", RULE, "t3")


def test_force_writes_despite_the_mismatch_and_exits_1(broken_pipeline, model, tmp_path):
    result = graphopt("optimize", model, "--force", "-o", tmp_path / "out.onnx")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "OUTPUTS DIFFER" in result.stdout
    assert "written anyway (--force)" in result.stderr
    assert (tmp_path / "out.onnx").exists()


def test_real_inputs_are_used(model, tmp_path):
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.ones((5, 8), np.float32))
    report = tmp_path / "report.json"
    result = graphopt("optimize", model, "--inputs", inputs, "--report-json", report, "--quiet")
    assert result.returncode == 0, result.stderr
    verification = json.loads(report.read_text())["verification"]
    assert verification["ok"] and verification["inputs"] == {"x": {"dtype": "float32", "shape": [5, 8]}}


def test_tolerances_reach_the_report(model, tmp_path):
    report = tmp_path / "report.json"
    args = ["--tolerance", "2e-3,2e-4", "--tolerance", "float16=5e-2,1e-2", "--report-json", report]
    assert graphopt("optimize", model, *args, "--quiet").returncode == 0
    output = json.loads(report.read_text())["verification"]["outputs"][0]
    assert (output["rtol"], output["atol"]) == (2e-3, 2e-4)


BAD_ARRAYS = {
    "missing": ({"y": np.ones((2, 8), np.float32)}, "'y' is not an input of the model"),
    "no_arrays": ({}, "no array for input(s) 'x'"),
    "dtype": ({"x": np.ones((2, 8), np.float64)}, "'x' is float64; the model's input is float32"),
    "rank": ({"x": np.ones((2, 8, 1), np.float32)}, "has rank 2 (batchx8)"),
    "static_dim": ({"x": np.ones((2, 7), np.float32)}, "the model's input is batchx8"),
}


@pytest.mark.parametrize("case", BAD_ARRAYS, ids=str)
def test_bad_npz_is_one_line_exit_2_nothing_written(model, tmp_path, case):
    arrays, message = BAD_ARRAYS[case]
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **arrays)
    before = _files(tmp_path)
    assert_bad_input(graphopt("optimize", model, "--inputs", inputs), message)
    assert _files(tmp_path) == before


def test_unreadable_npz_and_conflicting_options(model, tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04 truncated")
    assert_bad_input(graphopt_process("optimize", model, "--inputs", garbage), "cannot be read")
    assert_bad_input(graphopt("optimize", model, "--inputs", tmp_path / "none.npz"), "no such file")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.ones((2, 8), np.float32))
    assert_bad_input(graphopt("optimize", model, "--inputs", inputs, "--input-shape", "x:2x8"), "not both")
    assert_bad_input(graphopt("optimize", model, "--tolerance", "float32=-1,0"), "non-negative")
    assert _files(tmp_path) == ["garbage.npz", "inputs.npz", "m.onnx"]


def test_a_model_the_runtime_cannot_run_is_bad_input(tmp_path):
    model = tanh_chain()
    model.graph.node[0].op_type = "NoSuchOp"
    model.graph.node[0].domain = "example.custom"
    model.opset_import.append(onnx.helper.make_opsetid("example.custom", 1))
    path = tmp_path / "custom.onnx"
    onnx.save(model, str(path))
    assert_bad_input(graphopt("optimize", path), "ONNX Runtime cannot run the model", "--no-verify")
    assert _files(tmp_path) == ["custom.onnx"]
    assert graphopt("optimize", path, "--no-verify", "--quiet").returncode == 0
