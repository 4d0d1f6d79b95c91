import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper

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
    assert report["nodes"] == {"before": 69, "after": 2, "written": 2}
    assert report["verification"]["ok"] is True
    counts = {p["name"]: p["counts"] for p in report["passes"]}
    assert counts["batch_split_chains"] == {"batch_split_chains": 1}
    assert "batch_split_chains" in result.stdout and "numeric check" in result.stdout


def gelu_formula_model(opset: int) -> onnx.ModelProto:
    """x * 0.5 * (1 + erf(x / sqrt 2)), as the TorchScript exporter writes GELU, then a Tanh."""
    h = onnx.helper
    nodes = [
        h.make_node("Div", ["x", "sqrt2"], ["scaled"]),
        h.make_node("Erf", ["scaled"], ["erf"]),
        h.make_node("Add", ["erf", "one"], ["shifted"]),
        h.make_node("Mul", ["x", "shifted"], ["product"]),
        h.make_node("Mul", ["product", "half"], ["gelu"]),
        h.make_node("Tanh", ["gelu"], ["y"]),
    ]
    scalars = [
        onnx.numpy_helper.from_array(np.array(v, np.float32), n)
        for n, v in (("sqrt2", 2**0.5), ("one", 1.0), ("half", 0.5))
    ]
    graph = h.make_graph(
        nodes,
        "gelu_formula",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 8])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 8])],
        scalars,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def test_report_counts_the_nodes_the_written_model_has(tmp_path):
    """Before opset 20 ONNX has no Gelu: the recognized GELU is one node in the IR, written back as
    its formula; the report says how many nodes the file holds. (A GELU that no fusion consumes is
    given back as the model had it unless restore_unfused is skipped, and taken by fuse_bias_act as
    an AffineAct unless that is skipped too.)"""
    for opset, written_ops in ((17, 6), (20, 2)):
        model = tmp_path / f"gelu{opset}.onnx"
        onnx.save(gelu_formula_model(opset), model)
        report_path = tmp_path / f"report{opset}.json"
        skipped = "restore_unfused,fuse_bias_act"
        result = graphopt("optimize", model, "--report-json", report_path, "--skip", skipped)
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / f"report{opset}.json").read_text())
        on_disk = onnx.load(str(tmp_path / f"gelu{opset}.opt.onnx")).graph.node
        assert report["nodes"] == {"before": 6, "after": 2, "written": len(on_disk)}
        assert len(on_disk) == written_ops
        mentioned = f"the written model has {written_ops} nodes" in result.stdout
        assert mentioned == (written_ops != 2)


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
