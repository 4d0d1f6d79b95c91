import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    TORCH_FORMS,
    call_targets,
    export_onnx,
    export_torch,
    feeds_for,
    float64_reference,
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import graphopt
from models import zoo
from models.zoo_modules import DenseLayers

ACTIVATIONS = {"relu": nn.ReLU(), "silu": nn.SiLU(), "sigmoid": nn.Sigmoid(), "gelu": nn.GELU()}


def randomized(norm: nn.BatchNorm2d) -> nn.BatchNorm2d:
    with torch.no_grad():
        channels = norm.num_features
        norm.running_mean.copy_(torch.randn(channels))
        norm.running_var.copy_(torch.rand(channels) * 3 + 0.1)
        norm.weight.copy_(torch.randn(channels))
        norm.bias.copy_(torch.randn(channels))
    return norm


class ResidualNormAct(nn.Module):
    """A batch norm after a residual add (no conv to fold into), then its activation."""

    def __init__(self, act="relu", channels=6):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = randomized(nn.BatchNorm2d(channels, eps=1e-3))
        self.act = ACTIVATIONS[act]

    def forward(self, x):
        return self.act(self.norm(self.conv(x) + x))


def args():
    return (torch.randn(2, 6, 5, 7, generator=torch.Generator().manual_seed(0)),)


def check_numbers(module, got):
    (want,) = float64_reference(module, args())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_onnx_batch_norm_and_activation_fuse(act, path):
    torch.manual_seed(0)
    module = ResidualNormAct(act).eval()
    optimized, report = optimize_checked(export_onnx(module, args(), path))
    assert report.rule_counts.get("fuse_batch_norm_act") == 1
    assert [t for t in op_types(optimized) if t != "Constant"] == ["Conv", "Add", "AffineAct"]
    (node,) = [n for n in optimized.graph.node if n.op_type == "AffineAct"]
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {
        "activation": act.encode(),
        "axis": -3,  # (the channels of NCHW, counted from the end as the ONNX backend writes an axis)
    }
    (got,) = run_onnx(optimized, feeds_for(optimized, args()))
    check_numbers(module, got)


@pytest.mark.parametrize("form", TORCH_FORMS)
@pytest.mark.parametrize("act", ["relu", "silu"])
def test_torch_batch_norm_and_activation_fuse(act, form):
    torch.manual_seed(0)
    module = ResidualNormAct(act).eval()
    optimized, report = optimize_checked(export_torch(module, args(), form))
    assert report.rule_counts.get("fuse_batch_norm_act") == 1
    targets = call_targets(optimized)
    assert "graphopt.affine_act.default" in targets
    assert not any("batch_norm" in t for t in targets)
    check_numbers(module, optimized.module()(*args()).detach().numpy())


class ConvNormAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 6, 3, padding=1)
        self.norm = randomized(nn.BatchNorm2d(6))

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_a_batch_norm_after_a_conv_is_folded_not_fused(form):
    optimized, report = optimize_checked(export_torch(ConvNormAct().eval(), args(), form))
    assert not report.rule_counts.get("fuse_batch_norm_act")
    assert "graphopt.affine_act.default" not in call_targets(optimized)


def batch_norm_model(*, training_mode=0, mean_input=False, dtype=TensorProto.FLOAT):
    """x [2, 4, 3] → BatchNormalization → Relu, hand-built."""
    numpy_type = helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(0)
    weights = {
        "gamma": rng.standard_normal(4),
        "beta": rng.standard_normal(4),
        "mean": rng.standard_normal(4),
        "var": rng.random(4) + 0.5,
    }
    inputs = [helper.make_tensor_value_info("x", dtype, [2, 4, 3])]
    if mean_input:
        inputs.append(helper.make_tensor_value_info("mean", dtype, [4]))
    initializers = [
        numpy_helper.from_array(a.astype(numpy_type), n)
        for n, a in weights.items()
        if n != "mean" or not mean_input
    ]
    nodes = [
        helper.make_node(
            "BatchNormalization",
            ["x", "gamma", "beta", "mean", "var"],
            ["bn"],
            epsilon=1e-3,
            training_mode=training_mode,
        ),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", dtype, [2, 4, 3])]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8), weights


def test_hand_built_batch_norm_fuses_with_its_epsilon():
    model, w = batch_norm_model()
    optimized, report = graphopt.optimize(model)
    assert report.verification["ok"]
    assert [t for t in op_types(optimized) if t != "Constant"] == ["AffineAct"]
    x = np.random.default_rng(1).standard_normal((2, 4, 3)).astype(np.float32)
    (got,) = run_onnx(optimized, {"x": x})
    channel = (1, 4, 1)
    want = (x - w["mean"].reshape(channel)) / np.sqrt(w["var"].reshape(channel) + 1e-3)
    want = np.maximum(want * w["gamma"].reshape(channel) + w["beta"].reshape(channel), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_statistics_given_at_run_time_stay():
    model, _ = batch_norm_model(mean_input=True)
    optimized, report = graphopt.optimize(model)
    assert "BatchNormalization" in op_types(optimized)
    assert any("not a constant of 4 channels" in r for r in near_misses(report, "fuse_batch_norm_act"))


def test_float64_stays():
    model, _ = batch_norm_model(dtype=TensorProto.DOUBLE)
    optimized, report = graphopt.optimize(model)
    assert "BatchNormalization" in op_types(optimized)
    assert any("float64" in r for r in near_misses(report, "fuse_batch_norm_act"))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_an_onnx_batch_norm_between_convolutions_stays_in_the_runtimes_blocked_layout(path):
    optimized, report = optimize_checked(zoo.get(f"dense_layers.{path}").build())
    assert not report.rule_counts.get("fuse_batch_norm_act")
    assert op_types(optimized).count("BatchNormalization") == 2
    reasons = near_misses(report, "fuse_batch_norm_act")
    assert len(reasons) == 2 and all("sits between convolutions" in r for r in reasons), reasons


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_a_torch_batch_norm_between_convolutions_fuses(form):
    torch.manual_seed(0)
    module, x = DenseLayers().eval(), (torch.randn(2, 3, 8, 8),)
    optimized, report = optimize_checked(export_torch(module, x, form))
    assert report.rule_counts.get("fuse_batch_norm_act") == 2
    assert call_targets(optimized).count("graphopt.affine_act.default") == 2
    np.testing.assert_allclose(
        optimized.module()(*x).detach().numpy(), float64_reference(module, x)[0], rtol=1e-5, atol=1e-5
    )
