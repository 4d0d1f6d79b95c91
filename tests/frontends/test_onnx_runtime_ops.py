"""A model with an op ONNX Runtime registers in the ONNX domain but ONNX has no schema for (as ONNX
Runtime's transformer optimizer writes them) loads and optimizes; an unknown default-domain op is still
refused."""

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphopt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from damaged_models import run

ort = pytest.importorskip("onnxruntime")

EPSILON = 1e-5
SCALE = np.linspace(0.5, 1.5, 8).astype(np.float32)
X = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)


def rms_norm_then_relu(op_type="SimplifiedLayerNormalization"):
    """x → an RMS norm written as ONNX Runtime's default-domain contrib op → Relu, at opset 20."""
    nodes = [
        helper.make_node(op_type, ["x", "scale"], ["h"], axis=-1, epsilon=EPSILON),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(SCALE, "scale")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def reference(x):
    x = x.astype(np.float64)
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPSILON) * SCALE
    return np.maximum(normed, 0)


def ort_run(model):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": X})[0]


def test_the_model_is_one_the_checker_refuses_and_onnx_runtime_runs():
    model = rms_norm_then_relu()
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered for SimplifiedLayerNorm"):
        onnx.checker.check_model(model)
    np.testing.assert_allclose(ort_run(model), reference(X), rtol=1e-5, atol=1e-6)


def test_an_onnx_runtime_op_in_the_onnx_domain_is_carried_verbatim():
    model = rms_norm_then_relu()
    before = model.SerializeToString()
    optimized, report = graphopt.optimize(model, verify=False)
    assert model.SerializeToString() == before  # (the checker's detour leaves the caller's model alone)
    assert [(n.domain, n.op_type) for n in optimized.graph.node] == [
        ("", "SimplifiedLayerNormalization"),
        ("", "Relu"),
    ]
    assert [(o.domain, o.version) for o in optimized.opset_import] == [("", 20)]
    assert any("SimplifiedLayerNormalization (ONNX Runtime's" in note for note in report.notes), report.notes
    np.testing.assert_allclose(ort_run(optimized), reference(X), rtol=1e-5, atol=1e-6)


def test_the_command_line_optimizes_it(tmp_path):
    path = tmp_path / "rms.onnx"
    path.write_bytes(rms_norm_then_relu().SerializeToString())
    code, stderr, problem = run(tmp_path, "optimize", path)
    assert problem is None and code == 0, stderr
    np.testing.assert_allclose(ort_run(onnx.load(tmp_path / "out.onnx")), reference(X), rtol=1e-5, atol=1e-6)


def test_an_op_no_one_registers_in_the_onnx_domain_is_still_refused(tmp_path):
    path = tmp_path / "unknown.onnx"
    path.write_bytes(rms_norm_then_relu("NoSuchNormalization").SerializeToString())
    code, stderr, problem = run(tmp_path, "optimize", path)
    assert problem is None, problem
    assert code == 2, stderr
    assert "is not a valid ONNX graph: No Op registered for NoSuchNormalization" in stderr, stderr
    assert not (tmp_path / "out.onnx").exists()
