import numpy as np
import pytest
from exporting import near_misses, op_types, run_onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt

RNG = np.random.default_rng(3)
WEIGHTS = {
    "w": RNG.standard_normal((6, 2, 3, 3)).astype(np.float32),
    "b": RNG.standard_normal(6).astype(np.float32),
    "gamma": RNG.standard_normal(6).astype(np.float32),
    "beta": RNG.standard_normal(6).astype(np.float32),
    "mean": RNG.standard_normal(6).astype(np.float32),
    "var": (RNG.random(6) + 0.5).astype(np.float32),
}
X = RNG.standard_normal((2, 4, 7, 5)).astype(np.float32)


def conv_norm_model(*, conv_bias=True, also_read=False, weight_input=False):
    """x → Conv (groups 2, optional bias) → BatchNormalization (eps 1e-3) → Relu, opset 15."""
    conv_inputs = ["x", "w", "b"] if conv_bias else ["x", "w"]
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 7, 5])]
    if also_read:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 6, 7, 5]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))]
    if weight_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(WEIGHTS["w"].shape)))
    initializers = [
        numpy_helper.from_array(a, n) for n, a in WEIGHTS.items() if not (n == "w" and weight_input)
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def reference(conv_bias=True):
    """Float64 conv (groups 2, same padding) → batch norm → relu."""
    w = WEIGHTS["w"].astype(np.float64)
    x = np.pad(X.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((2, 6, 7, 5))
    for o in range(6):
        group = o // 3
        for i in range(7):
            for j in range(5):
                patch = x[:, group * 2 : group * 2 + 2, i : i + 3, j : j + 3]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    if conv_bias:
        out += WEIGHTS["b"].reshape(1, 6, 1, 1)
    channel = (1, 6, 1, 1)
    normed = (out - WEIGHTS["mean"].reshape(channel)) / np.sqrt(WEIGHTS["var"].reshape(channel) + 1e-3)
    return np.maximum(normed * WEIGHTS["gamma"].reshape(channel) + WEIGHTS["beta"].reshape(channel), 0)


@pytest.mark.parametrize("conv_bias", [True, False])
def test_batch_norm_after_a_conv_folds_into_its_weights(conv_bias):
    optimized, report = graphopt.optimize(conv_norm_model(conv_bias=conv_bias))
    assert report.verification["ok"]
    assert report.rule_counts.get("fold_onnx_batch_norm_into_conv") == 1
    assert [t for t in op_types(optimized) if t != "Constant"] == ["Conv", "Relu"]
    (conv,) = [n for n in optimized.graph.node if n.op_type == "Conv"]
    assert len(conv.input) == 3
    assert {a.name: helper.get_attribute_value(a) for a in conv.attribute}["group"] == 2
    (got,) = run_onnx(optimized, {"x": X})
    np.testing.assert_allclose(got, reference(conv_bias), rtol=1e-4, atol=1e-4)


def test_a_conv_output_read_elsewhere_stays():
    optimized, report = graphopt.optimize(conv_norm_model(also_read=True))
    # (unfolded, the batch norm fuses with its activation instead)
    assert [t for t in op_types(optimized) if t != "Constant"] == ["Conv", "AffineAct"]
    assert any("is read by more than" in r for r in near_misses(report, "fold_onnx_batch_norm_into_conv"))


def test_a_weight_given_at_run_time_stays():
    optimized, report = graphopt.optimize(conv_norm_model(weight_input=True))
    assert "Conv" in op_types(optimized)
    assert any("weight of" in r for r in near_misses(report, "fold_onnx_batch_norm_into_conv"))
