import numpy as np
import pytest
import torch
from exporting import ONNX_PATHS, export_onnx, near_misses, op_types, optimize_checked, run_onnx
from exporting import float64_reference as torch_float64_reference
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphopt

D = 8
EPS = 1e-5


def cast_norm_model(norm: str, *, act=None, residual=False, scale=None, up_read_too=False, opset=13):
    """A float16 model whose norm is spelled out in float32 between Casts (a mixed-precision export):
    RMS norm, or layer norm below opset 17."""
    f16, f32 = TensorProto.FLOAT16, TensorProto.FLOAT
    nodes, inits = [], [numpy_helper.from_array(np.array(EPS, np.float32), "eps")]
    inputs = [helper.make_tensor_value_info("x", f16, [4, D])]
    source = "x"
    if residual:
        inputs.append(helper.make_tensor_value_info("r", f16, [4, D]))
        nodes.append(helper.make_node("Add", ["x", "r"], ["s"]))
        source = "s"
    nodes.append(helper.make_node("Cast", [source], ["xf"], to=f32))
    if norm == "rms":
        centered = "xf"
    else:
        nodes += [
            helper.make_node("ReduceMean", ["xf"], ["mean"], axes=[-1]),
            helper.make_node("Sub", ["xf", "mean"], ["d"]),
        ]
        centered = "d"
    nodes += [
        helper.make_node("Mul", [centered, centered], ["square"]),
        helper.make_node("ReduceMean", ["square"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["std"]),
        helper.make_node("Div", [centered, "std"], ["normed"]),
    ]
    last = "normed"
    if scale is not None:
        inits.append(numpy_helper.from_array(np.asarray(scale, np.float32), "scale"))
        nodes.append(helper.make_node("Mul", ["normed", "scale"], ["scaled"]))
        last = "scaled"
    nodes.append(helper.make_node("Cast", [last], ["h" if act else "y"], to=f16))
    if act:
        nodes.append(helper.make_node(act, ["h"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", f16, [4, D])]
    if up_read_too:
        outputs.append(helper.make_tensor_value_info("xf", f32, [4, D]))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def large_rows(seed=0) -> np.ndarray:
    """Values from 300 to 2000 in magnitude: their squares overflow float16 (max 65504)."""
    rng = np.random.default_rng(seed)
    return (rng.choice([-1, 1], (4, D)) * rng.uniform(300, 2000, (4, D))).astype(np.float16)


def float64_reference(norm, x, *, act=None, r=None, scale=None):
    s = x if r is None else (x + r)  # (float16 + float16 is rounded to float16 first, as ONNX does)
    s = s.astype(np.float64)
    if norm == "layer":
        s = s - s.mean(-1, keepdims=True)
    y = s / np.sqrt((s * s).mean(-1, keepdims=True) + EPS)
    if scale is not None:
        y = y * np.asarray(scale, np.float32).astype(np.float64)
    return {None: y, "Tanh": np.tanh(y), "Relu": np.maximum(y, 0)}[act]


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_a_norm_without_a_fusion_stays_in_float32(norm):
    model = cast_norm_model(norm)
    optimized, report = graphopt.optimize(model, inputs={"x": large_rows()})
    assert report.verification["ok"], report.verification["summary"]
    ops = op_types(optimized)
    assert ops[0] == "Cast" and ops[-1] == "Cast" and "NormAct" not in ops
    assert ops == op_types(model)
    want = float64_reference(norm, large_rows())
    (ort_out,) = run_onnx(optimized, {"x": large_rows()})
    (exact,) = ReferenceEvaluator(optimized).run(None, {"x": large_rows()})  # (ONNX's own semantics)
    for got in (ort_out, exact):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("act", ["Tanh", "Relu"])
@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_a_norm_with_an_activation_fuses_in_float16(norm, act):
    scale = np.linspace(0.5, 2.0, D)
    optimized, report = optimize_checked(
        cast_norm_model(norm, act=act, scale=scale), inputs={"x": large_rows()}
    )
    assert op_types(optimized) == ["NormAct"]
    assert report.rule_counts.get("fuse_norm_act_between_casts") == 1
    (got,) = run_onnx(optimized, {"x": large_rows()})
    assert got.dtype == np.float16
    want = float64_reference(norm, large_rows(), act=act, scale=scale)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("act", ["Tanh", None])
def test_a_residual_add_before_the_casts_fuses(act):
    x, r = large_rows(1), large_rows(2)
    model = cast_norm_model("layer", act=act, residual=True)
    optimized, report = optimize_checked(model, inputs={"x": x, "r": r})
    assert op_types(optimized) == ["NormAct"]
    rule = "fuse_add_norm_act_between_casts" if act else "fuse_add_norm_between_casts"
    assert report.rule_counts.get(rule) == 1
    (got,) = run_onnx(optimized, {"x": x, "r": r})
    want = float64_reference("layer", x, act=act, r=r)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_a_float32_value_read_elsewhere_keeps_the_casts():
    optimized, report = optimize_checked(cast_norm_model("rms", act="Tanh", up_read_too=True))
    assert "NormAct" not in op_types(optimized)
    assert op_types(optimized).count("Cast") == 2
    assert "'xf' is a graph output" in near_misses(report, "fuse_norm_act_between_casts")


def test_a_scale_too_large_for_float16_keeps_the_casts():
    scale = np.full(D, 1e5)
    optimized, report = optimize_checked(cast_norm_model("rms", act="Tanh", scale=scale))
    assert "NormAct" not in op_types(optimized)
    reasons = near_misses(report, "fuse_norm_act_between_casts")
    assert any("does not fit in float16" in r for r in reasons), reasons


class T5StyleNorm(torch.nn.Module):
    """T5's RMS norm in a float16 model: computed in float32, cast back, then maybe an activation."""

    def __init__(self, act: bool):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 16))
        self.act = act

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        y = (self.weight * h).to(x.dtype)
        return torch.tanh(y) if self.act else y


@pytest.mark.parametrize("act", [True, False])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_exported_float16_rms_norm(path, act):
    module = T5StyleNorm(act)
    x = (torch.randn(3, 16, generator=torch.Generator().manual_seed(4)) * 500).half()
    optimized, _ = optimize_checked(export_onnx(module, (x,), path))
    ops = op_types(optimized)
    if act:
        assert ops == ["NormAct"]
    else:
        assert ops[0] == "Cast" and ops[-1] == "Cast" and "NormAct" not in ops
    (want,) = torch_float64_reference(module, (x,))
    (got,) = run_onnx(optimized, {optimized.graph.input[0].name: x.numpy()})
    (exact,) = ReferenceEvaluator(optimized).run(None, {optimized.graph.input[0].name: x.numpy()})
    for out in (got, exact) if not act else (got,):
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)
