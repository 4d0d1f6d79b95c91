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
from onnx import TensorProto, helper

import graphopt


class T5StyleNorm(torch.nn.Module):
    """A residual add, then T5's RMS norm, which casts to float32 whatever the model's dtype is."""

    def __init__(self, d=16):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x, r):
        h = (x + r).to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        return self.weight * (h * torch.rsqrt(variance + 1e-6)), h


class RealCast(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x.to(torch.float16)).to(torch.float32)


def args():
    return torch.randn(3, 5, 16), torch.randn(3, 5, 16)


def test_noop_cast_goes_and_residual_add_fuses_into_the_norm():
    module = T5StyleNorm()
    model = export_onnx(module, args(), "torchscript")
    assert "Cast" in op_types(model)
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("drop_noop_cast", 0) >= 1
    assert "Cast" not in op_types(optimized)
    assert report.rule_counts.get("fuse_add_norm") == 1, op_types(optimized)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_outputs_match_the_float64_reference(path):
    module, inputs = T5StyleNorm(), args()
    optimized, _ = optimize_checked(export_onnx(module, inputs, path))
    names = [i.name for i in optimized.graph.input]
    actual = run_onnx(optimized, {n: a.numpy() for n, a in zip(names, inputs, strict=True)})
    for got, want in zip(actual, float64_reference(module, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_casts_that_convert_stay():
    optimized, report = optimize_checked(export_onnx(RealCast(), (torch.randn(4, 8),), "dynamo"))
    assert op_types(optimized).count("Cast") == 2
    assert "drop_noop_cast" not in report.rule_counts


def test_graph_output_copied_from_an_input_stays():
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    optimized, report = graphopt.optimize(model)
    assert op_types(optimized) == ["Cast"]
    assert any("is a graph output copied from 'x'" in r for r in near_misses(report, "drop_noop_cast"))


class ContiguousBeforeNorm(torch.nn.Module):
    """SD3's patch embedding: the position embedding added to a transposed conv output, then
    ``.contiguous()`` (a layout conversion, the same values) between that residual add and the norm."""

    def __init__(self, d=8):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 16, d))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        h = (x.transpose(1, 2) + self.pos).contiguous()
        return h + torch.tanh(self.norm(h))


class ContiguousBeforeView(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x.transpose(1, 2).contiguous().view(x.shape[0], -1))


def test_contiguous_goes_and_the_residual_add_fuses_into_the_norm():
    program = torch.export.export(ContiguousBeforeNorm().eval(), (torch.randn(2, 8, 16),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    assert report.rule_counts.get("drop_contiguous") == 1
    assert report.rule_counts.get("fuse_add_norm_act") == 1, report.rule_counts
    targets = {str(n.target) for n in optimized.graph.nodes if n.op == "call_function"}
    assert "aten.contiguous.default" not in targets


def test_contiguous_before_a_view_stays():
    module = ContiguousBeforeView()
    program = torch.export.export(module, (torch.randn(2, 8, 16),))
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    assert "drop_contiguous" not in report.rule_counts
    x = torch.randn(2, 8, 16)
    torch.testing.assert_close(optimized.module()(x), module(x))
