"""Residual → norm → activation → a narrow linear layer becomes one NormActLinear that adds the residual
and returns the sum where later layers read it, through both ONNX exporters and torch.export; the
rewritten model computes what the original does in ONNX Runtime (with graphopt's kernels and with the
fallback functions alone) and in torch. What the fused op cannot take stays, with a near miss."""

import numpy as np
import onnxruntime as ort
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
from onnx import helper

from models.residual_head import ResidualHead, example_inputs

TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def fallback_outputs(model, feeds):
    """The model in ONNX Runtime without graphopt's library: the fused ops' fallback functions run."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_matches(got, want, dtype=torch.float32):
    tol = TOLERANCE[dtype]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g.float() if isinstance(g, torch.Tensor) else g, dtype=np.float64)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())))


def the_fused_node(model):
    (node,) = [n for n in model.graph.node if n.op_type == "NormActLinear"]
    return node


@pytest.mark.parametrize("keep_sum", [False, True])
@pytest.mark.parametrize("norm", ["rms", "layer"])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_residual_head_becomes_one_norm_act_linear(path, norm, keep_sum):
    module, args = ResidualHead(norm=norm, keep_sum=keep_sum).eval(), example_inputs()
    model = export_onnx(module, args, path)

    optimized, report = optimize_checked(model)

    # (the MatMul and Add are f(x), a Linear(D, D): the residual add joined the head's kernel)
    assert op_types(optimized) == ["MatMul", "Add", "NormActLinear"]
    node = the_fused_node(optimized)
    attrs = {a.name: helper.get_attribute_value(a).decode() for a in node.attribute if a.type == a.STRING}
    assert (attrs["norm"], attrs["activation"]) == (norm, "silu")
    assert len(node.input) == 6 and node.input[5] and len(node.output) == 2
    assert not near_misses(report, "fuse_norm_act_matmul_bias")
    feeds = feeds_for(model, args)
    expected = float64_reference(module, args)
    assert_matches(run_onnx(optimized, feeds), expected)
    assert_matches(fallback_outputs(optimized, feeds), expected)


@pytest.mark.parametrize("keep_sum", [False, True])
@pytest.mark.parametrize("form", TORCH_FORMS)
def test_residual_head_through_torch_export(form, keep_sum):
    module, args = ResidualHead(norm="rms", keep_sum=keep_sum).eval(), example_inputs()

    optimized, _ = optimize_checked(export_torch(module, args, form))

    targets = call_targets(optimized)
    assert targets.count("graphopt.add_norm_act_linear.default") == 1
    assert not any("norm" in t and "linear" not in t for t in targets), targets
    assert not any(t in targets for t in ("aten.silu.default", "aten.rsqrt.default")), targets
    with torch.no_grad():
        got = optimized.module()(*args)
    assert_matches(got if keep_sum else (got,), float64_reference(module, args))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_residual_head(dtype):
    module, args = ResidualHead(norm="layer", keep_sum=True).eval().to(dtype), example_inputs()
    args = tuple(a.to(dtype) for a in args)

    optimized, _ = optimize_checked(export_torch(module, args, "exported"))

    assert call_targets(optimized).count("graphopt.add_norm_act_linear.default") == 1
    with torch.no_grad():
        got = optimized.module()(*args)
    assert_matches(got, float64_reference(module, args), dtype)


def test_float16_residual_head_in_onnx_runtime():
    module, args = ResidualHead(norm="layer", keep_sum=True).eval().half(), example_inputs()
    args = tuple(a.half() for a in args)
    model = export_onnx(module, args, "dynamo")

    optimized, _ = optimize_checked(model)

    assert op_types(optimized)[-1] == "NormActLinear"
    feeds, expected = feeds_for(model, args), float64_reference(module, args)
    assert_matches(run_onnx(optimized, feeds), expected, torch.float16)
    assert_matches(fallback_outputs(optimized, feeds), expected, torch.float16)


class ActivationReadTwice(torch.nn.Module):
    """x + f(x) → LayerNorm → SiLU → Linear(D, 2), the activation also read by a second layer."""

    def __init__(self, d=32):
        super().__init__()
        self.proj, self.norm, self.head = torch.nn.Linear(d, d), torch.nn.LayerNorm(d), torch.nn.Linear(d, 2)

    def forward(self, x):
        h = torch.nn.functional.silu(self.norm(x + self.proj(x)))
        return self.head(h), h * 2.0


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_an_activation_read_elsewhere_keeps_the_linear_apart(path):
    module, args = ActivationReadTwice().eval(), (torch.randn(4, 32),)
    optimized, report = optimize_checked(export_onnx(module, args, path))
    assert "NormActLinear" not in op_types(optimized) and "NormAct" in op_types(optimized)
    reasons = [m.reason for p in report.passes for m in p.near_misses if m.rule.startswith("fuse_norm_act_")]
    assert any("is also read by mul" in r for r in reasons), reasons
    assert_matches(run_onnx(optimized, feeds_for(optimized, args)), float64_reference(module, args))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_wide_head_on_a_residual_stays_with_the_matmul(path):
    module, args = ResidualHead(k=64, keep_sum=True).eval(), example_inputs()
    optimized, report = optimize_checked(export_onnx(module, args, path))
    assert "NormActLinear" not in op_types(optimized) and "NormAct" in op_types(optimized)
    reasons = [m.reason for p in report.passes for m in p.near_misses]
    assert any("64 output features" in r for r in reasons), reasons
