"""Fallback bodies as ONNX Runtime's own optimizer sees them once it has inlined them: where the
replaced subgraph was a norm or GELU that its CPU EP fuses into one kernel (SimplifiedLayerNormalization,
LayerNormalization, FastGelu), the body must be spelled so that it fuses too, or a user without
graphopt's library gets a slower model (tiny LLaMA, Qwen2 and GPT-2 exported at opset 17: 1.12-1.16x).
And the ONNX backend writes a fused op's axis counted from the end, so the body needs no Flatten."""

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from fused_checks import assert_close
from onnx import TensorProto, helper

import graphopt
from graphopt.fused import DOMAIN, DOMAIN_VERSION, NORM_ACT, by_name
from graphopt.fused.onnx_functions import attach_functions

SHAPE, WIDTH = (2, 8, 16), 16


def ort_ops(model: onnx.ModelProto, tmp_path) -> collections.Counter:
    """The ops of the graph ONNX Runtime's CPU EP runs (default optimization level, no library)."""
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "ort_optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)


def fused_model(node, params: dict[str, np.ndarray], opset: int, then: str | None = "Abs") -> onnx.ModelProto:
    """``node`` reading graph input X and constant ``params``, with its fallback function, at ``opset``;
    its output Y goes through ``then`` to the graph's output (ONNX Runtime fuses nothing whose output is
    the graph's), or is the graph's output."""
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("X", "Z" if then else "Y")]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in params.items()]
    nodes = [node, helper.make_node(then, ["Y"], ["Z"])] if then else [node]
    graph = helper.make_graph(nodes, "fused", io[:1], io[1:], inits)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    attach_functions(model)
    return model


def params(*names: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: (1 + 0.2 * rng.standard_normal(WIDTH)).astype(np.float32) for n in names}


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The graph's output: Abs of the fused node's."""
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"X": x}
    )[0]


@pytest.mark.parametrize(
    ("norm", "opset", "fused_op"),
    [("rms", 17, "SimplifiedLayerNormalization"), ("rms", 18, "SimplifiedLayerNormalization"),
     ("layer", 16, "LayerNormalization")],
)  # fmt: skip
def test_a_norm_spelled_out_fuses_into_the_runtime_kernel(norm, opset, fused_op, tmp_path):
    """Below the opsets of RMSNormalization (23) and LayerNormalization (17) the body spells the norm
    out; ONNX Runtime fuses it only as Pow(x, 2) ... Div(x, Sqrt(...)) then the scale (Mul(x, x) and
    Reciprocal did not), and the values stay the float64 reference's."""
    given = params("Scale", "Bias") if norm == "layer" else params("Scale")
    inputs = ["X", "Scale", "Bias" if norm == "layer" else ""]
    node = helper.make_node("NormAct", inputs, ["Y"], domain=DOMAIN, norm=norm, epsilon=1e-6, axis=-1)
    model = fused_model(node, given, opset)

    ops = ort_ops(model, tmp_path)

    assert ops[fused_op] == 1 and not ops["ReduceMean"] and not ops["Pow"], ops
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    expected, _ = NORM_ACT.reference(
        x, given["Scale"], given.get("Bias"), norm=norm, activation="identity", epsilon=1e-6, axis=-1
    )
    assert_close(run(model, x), np.abs(expected), "float32")


def test_gelu_tanh_fuses_into_fast_gelu(tmp_path):
    """Before ONNX's Gelu (opset 20) the tanh GELU is spelled out; ONNX Runtime fuses it into FastGelu
    (the bias add too) with the cube as Pow(x, 3), as exporters write GPT-2's, and not as x * (x * x)."""
    node = helper.make_node("AffineAct", ["X", "", "Bias"], ["Y"], domain=DOMAIN, activation="gelu_tanh")
    given = params("Bias")
    model = fused_model(node, given, 17)

    ops = ort_ops(model, tmp_path)

    assert ops["FastGelu"] == 1 and not ops["Tanh"], ops
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    expected = by_name("AffineAct").reference(x, None, given["Bias"], activation="gelu_tanh", axis=-1)
    assert_close(np.abs(run(model, x)), np.abs(expected), "float32")


def test_a_body_in_the_input_type_adds_no_copy_of_a_graph_output(tmp_path):
    """A body that computes in X's type ends in an Identity, which ONNX Runtime removes even where it
    writes the graph's output; a Cast to the same type stays there, one more copy per call."""
    node = helper.make_node("AffineAct", ["X", "", "Bias"], ["Y"], domain=DOMAIN, activation="relu")
    ops = ort_ops(fused_model(node, params("Bias"), 17, then=None), tmp_path)
    assert ops == {"Add": 1, "Relu": 1}, ops


def rms_norm_as_torchscript_writes_it(opset: int) -> onnx.ModelProto:
    """x + r, then an RMS norm as the TorchScript exporter writes LLaMA's (which ONNX Runtime fuses)."""
    const = {n: helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("two", 2.0), ("eps", 1e-6))}
    const["one"] = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [
        helper.make_node("Add", ["x", "r"], ["s"]),
        helper.make_node("Pow", ["s", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Div", ["one", "rms"], ["inv"]),
        helper.make_node("Mul", ["s", "inv"], ["n"]),
        helper.make_node("Mul", ["weight", "n"], ["y"]),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("x", "r", "y")]
    weight = onnx.numpy_helper.from_array(params("weight")["weight"], "weight")
    graph = helper.make_graph(nodes, "rms", io[:2], io[2:], [weight, *const.values()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_graphopt_output_fuses_as_the_original_does(tmp_path):
    """The fused node's axis is written from the end (the IR counts it from the front), so its body
    reduces over a constant trailing axis, with no Flatten by X's rank between ONNX Runtime and the
    norm it fuses."""
    original = rms_norm_as_torchscript_writes_it(17)
    optimized, _ = graphopt.optimize(original)

    (fused,) = [n for n in optimized.graph.node if n.domain == DOMAIN]
    assert fused.op_type == "NormAct" and {a.name: a.i for a in fused.attribute}["axis"] == -1, fused
    ops, original_ops = ort_ops(optimized, tmp_path), ort_ops(original, tmp_path)
    assert ops["SimplifiedLayerNormalization"] == original_ops["SimplifiedLayerNormalization"] == 1
    assert not ops["Flatten"] and not ops["Pow"], ops
