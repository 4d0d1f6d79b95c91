import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    export_onnx,
    float64_reference,
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)
from onnx import helper

from models.split_stack import SplitStack


class Head(torch.nn.Module):
    """LayerNorm → activation → a narrow linear layer → activation: a scoring head."""

    def __init__(self, d=32, k=1, act=torch.tanh, out_act=torch.relu):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.linear = torch.nn.Linear(d, k)
        self.act, self.out_act = act, out_act

    def forward(self, x):
        h = self.act(self.norm(x))
        y = self.linear(h)
        return self.out_act(y) if self.out_act is not None else y


CASES = {
    "tanh_relu_k1": (lambda: Head(), "tanh", "relu"),
    "gelu_k4_no_out_act": (lambda: Head(k=4, act=torch.nn.functional.gelu, out_act=None), "gelu", "identity"),
    "silu_sigmoid_k16": (
        lambda: Head(k=16, act=torch.nn.functional.silu, out_act=torch.sigmoid),
        "silu",
        "sigmoid",
    ),
}


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_norm_act_and_narrow_linear_fuse(case, path):
    make, activation, out_activation = CASES[case]
    module = make()
    args = (torch.randn(6, 5, 32),)
    optimized, _ = optimize_checked(export_onnx(module, args, path))
    assert [t for t in op_types(optimized) if t != "Constant"] == ["NormActLinear"]
    attrs = {a.name: helper.get_attribute_value(a) for a in optimized.graph.node[-1].attribute}
    assert attrs["activation"].decode() == activation
    assert attrs["out_activation"].decode() == out_activation
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_seed_is_one_view_and_one_kernel(path):
    module = SplitStack(n=4, b=16, d=32)
    args = (torch.randn(4 * 16 * 32),)
    optimized, report = optimize_checked(export_onnx(module, args, path))
    assert [t for t in op_types(optimized) if t != "Constant"] == ["Reshape", "NormActLinear"]
    assert report.rule_counts["batch_split_chains"] == 1
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [32, 64])  # (float32 fuses through 16 outputs, the last measured win)
def test_wide_linear_stays_with_the_matmul(k):
    optimized, report = optimize_checked(export_onnx(Head(k=k), (torch.randn(6, 32),), "dynamo"))
    assert "NormActLinear" not in op_types(optimized) and "NormAct" in op_types(optimized)
    assert any(f"{k} output features" in r for r in near_misses(report, "fuse_norm_act_linear_act"))


class ResidualHead(Head):
    def forward(self, x):
        return self.out_act(self.linear(self.act(self.norm(x + x.flip(0)))))


def test_norm_act_with_a_residual_joins_the_linear():
    module, args = ResidualHead(), (torch.randn(6, 32),)
    optimized, report = optimize_checked(export_onnx(module, args, "dynamo"))
    assert [t for t in op_types(optimized) if t != "Constant"][-1:] == ["NormActLinear"]
    assert "NormAct" not in op_types(optimized)
    assert not near_misses(report, "fuse_norm_act_linear_act")
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


class BroadcastBiasHead(torch.nn.Module):
    """LayerNorm → tanh → matmul → + a bias of ``bias_shape`` → relu."""

    def __init__(self, bias_shape, d=32, k=2):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.weight = torch.nn.Parameter(torch.randn(d, k) / d**0.5)
        self.bias = torch.nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(torch.tanh(self.norm(x)) @ self.weight + self.bias)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_bias_that_adds_dims_stays_outside_the_kernel(path):
    module, args = BroadcastBiasHead((1, 1, 2)), (torch.randn(6, 32),)
    optimized, report = optimize_checked(export_onnx(module, args, path))
    assert op_types(optimized) == ["NormActLinear", "Add", "Relu"]
    reasons = near_misses(report, "fuse_norm_act_matmul_bias_act")
    assert any("of shape [1, 1, 2] adds dims to the 2-dim output" in r for r in reasons), reasons
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    assert actual.shape == expected.shape == (1, 6, 2)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_bias_with_leading_ones_within_the_rank_fuses(path):
    module, args = BroadcastBiasHead((1, 2)), (torch.randn(6, 32),)
    optimized, _ = optimize_checked(export_onnx(module, args, path))
    assert op_types(optimized) == ["NormActLinear"]
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    assert actual.shape == expected.shape == (6, 2)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
