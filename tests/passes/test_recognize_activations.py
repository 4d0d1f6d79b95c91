import math

import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    export_onnx,
    feeds_for,
    float64_reference,
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)
from onnx import TensorProto, helper, numpy_helper
from torch import nn


def recognized(model, **options):
    """Optimizes without restore_unfused, which gives back what no fusion consumed, nor fuse_bias_act,
    which takes a spelled-out activation alone: these tests look at what the recognizer itself made."""
    return optimize_checked(model, skip=("restore_unfused", "fuse_bias_act"), **options)


def erf_gelu(one_shape=(), half=0.5, sqrt2=math.sqrt(2.0), dims=(4, 8), sqrt2_shape=()):
    """x * (1 + erf(x / √2)) * 0.5, as exporters write GELU, with the "1" of ``one_shape`` (opset 20,
    where a recognized GELU is written as ``Gelu``)."""
    steps = [
        ("Div", ["x", "sqrt2"], "scaled"),
        ("Erf", ["scaled"], "erf"),
        ("Add", ["erf", "one"], "plus"),
        ("Mul", ["x", "plus"], "product"),
        ("Mul", ["product", "half"], "y"),
    ]
    constants = {
        "sqrt2": np.full(sqrt2_shape, sqrt2, np.float32),
        "one": np.ones(one_shape, np.float32),
        "half": np.float32(half),
    }
    out_rank = max(len(dims), len(one_shape), len(sqrt2_shape))
    graph = helper.make_graph(
        [helper.make_node(op, inputs, [out]) for op, inputs, out in steps],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=8)


def gelu_reference(x: np.ndarray, one_shape=(), half=0.5) -> np.ndarray:
    x = x.astype(np.float64)
    erf = np.vectorize(math.erf)(x / math.sqrt(2.0))
    return x * (np.ones(one_shape) + erf) * half


X = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32) * 2


@pytest.mark.parametrize("one_shape", [(1, 1, 1), (1, 1, 1, 1)])
def test_a_one_of_higher_rank_is_not_taken_for_a_scalar(one_shape):
    optimized, report = recognized(erf_gelu(one_shape))
    assert "Erf" in op_types(optimized)
    assert not any(rule.startswith("gelu") for rule in report.rule_counts)
    (got,) = run_onnx(optimized, {"x": X})
    want = gelu_reference(X, one_shape)
    assert got.shape == want.shape == (*[1] * (len(one_shape) - 2), 4, 8)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("one_shape", [(), (1,), (1, 1)])
def test_a_one_within_the_rank_is_recognized(one_shape):
    optimized, report = recognized(erf_gelu(one_shape))
    assert op_types(optimized) == ["Gelu"]
    assert report.rule_counts.get("gelu_from_erf[half_last]") == 1
    (got,) = run_onnx(optimized, {"x": X})
    np.testing.assert_allclose(got, gelu_reference(X), rtol=1e-5, atol=1e-6)


def test_a_half_that_is_not_one_half_is_no_gelu():
    optimized, _ = recognized(erf_gelu(half=0.5000001))
    assert "Erf" in op_types(optimized)
    (got,) = run_onnx(optimized, {"x": X})
    np.testing.assert_allclose(
        got, gelu_reference(X, half=float(np.float32(0.5000001))), rtol=1e-6, atol=1e-6
    )


def test_a_divisor_of_higher_rank_is_a_near_miss():
    optimized, report = recognized(erf_gelu(sqrt2_shape=(1, 1, 1)))
    assert "Erf" in op_types(optimized)
    reason = "'sqrt2' is not the scalar 1.41421, so this is not GELU"
    assert reason in near_misses(report, "gelu_from_erf[half_last]")
    (got,) = run_onnx(optimized, {"x": X})
    assert got.shape == (1, 4, 8)
    np.testing.assert_allclose(got[0], gelu_reference(X), rtol=1e-5, atol=1e-6)


def bloom_gelu(x, c=0.044715):
    """BLOOM's GELU: the tanh approximation with its polynomial factored, √(2/π) on x first."""
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + c * x * x)))


def gelu_fast(x):
    """transformers' FastGELUActivation."""
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


class LinearThen(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.linear, self.act = nn.Linear(16, 32), act

    def forward(self, x):
        return self.act(self.linear(x))


def _affine_act_activations(model) -> list[bytes]:
    return [
        a.s
        for n in model.graph.node
        if n.op_type == "AffineAct"
        for a in n.attribute
        if a.name == "activation"
    ]


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("act", [bloom_gelu, gelu_fast], ids=["bloom", "gelu_fast"])
def test_a_factored_tanh_gelu_is_recognized_and_fuses_with_the_bias_before_it(act, path):
    torch.manual_seed(0)
    module, args = LinearThen(act).eval(), (3 * torch.randn(4, 16),)
    model = export_onnx(module, args, path)
    optimized, report = optimize_checked(model)
    assert sum(n for rule, n in report.rule_counts.items() if "factored" in rule) == 1
    assert _affine_act_activations(optimized) == [b"gelu_tanh"]
    (got,) = run_onnx(optimized, feeds_for(model, args))
    np.testing.assert_allclose(got, float64_reference(module, args)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_factored_polynomial_with_another_coefficient_is_no_gelu(path):
    module = LinearThen(lambda x: bloom_gelu(x, c=0.05)).eval()
    model = export_onnx(module, (torch.randn(4, 16),), path)
    optimized, report = optimize_checked(model)
    assert not any("gelu" in rule for rule in report.rule_counts)
    assert "Tanh" in op_types(optimized) and "AffineAct" not in op_types(optimized)
