"""Optimized models through the tools users run after graphopt: ONNX Runtime's transformer optimizer
inlines the fallback functions and fuses what it finds in them (a residual add into a
LayerNormalization becomes its SkipLayerNormalization), reading a LayerNormalization's Bias input
whether or not the model has one. A NormAct without Bias (a LayerNorm whose shift graphopt folded away:
zero, as in any freshly initialized model) made it fail with an IndexError."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphopt
from graphopt.fused import NORM_ACT
from graphopt.fused.onnx_decompose import Variant, decompose

optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
ort = pytest.importorskip("onnxruntime")

WIDTH = 16


def residual_layer_norm_gelu() -> onnx.ModelProto:
    """x + r → LayerNormalization (unit scale, zero shift) → Gelu, as an exporter writes a freshly
    initialized block."""
    ones = helper.make_tensor("scale", TensorProto.FLOAT, [WIDTH], [1.0] * WIDTH)
    zeros = helper.make_tensor("shift", TensorProto.FLOAT, [WIDTH], [0.0] * WIDTH)
    nodes = [
        helper.make_node("Add", ["x", "r"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "scale", "shift"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Gelu", ["n"], ["y"]),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8, WIDTH]) for n in ("x", "r", "y")]
    graph = helper.make_graph(nodes, "block", io[:2], io[2:], [ones, zeros])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def test_a_layer_norm_body_always_has_a_bias():
    nodes, _ = decompose(Variant.of(NORM_ACT, norm="layer", activation="gelu"))
    (norm,) = [n for n in nodes if n.op_type == "LayerNormalization"]
    assert len(norm.input) == 3 and all(norm.input)


def test_the_transformer_optimizer_fuses_graphopt_output(tmp_path):
    optimized, _ = graphopt.optimize(residual_layer_norm_gelu())
    normact = [n for n in optimized.graph.node if n.op_type == "NormAct"]
    assert len(normact) == 1 and list(normact[0].input[1:3]) == ["", ""]  # (unit scale, zero shift: gone)
    path = tmp_path / "model.onnx"
    onnx.save(optimized, path)
    fused = optimizer.optimize_model(str(path), model_type="bert", num_heads=2, hidden_size=WIDTH)
    assert fused.get_fused_operator_statistics()["SkipLayerNormalization"] == 1
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((2, 8, WIDTH)).astype(np.float32) for n in ("x", "r")}
    (expected,) = ort.InferenceSession(residual_layer_norm_gelu().SerializeToString()).run(None, feeds)
    (y,) = ort.InferenceSession(fused.model.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
