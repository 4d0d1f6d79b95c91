import numpy as np
import pytest
import torch
from exporting import (
    ONNX_PATHS,
    call_targets,
    export_onnx,
    export_torch,
    feeds_for,
    float64_reference,
    op_types,
    optimize_checked,
    run_onnx,
)
from onnx import TensorProto, helper, numpy_helper
from torch import nn


class ScaledResidualBlock(nn.Module):
    """diffusers' ResNet block output, ``(input + hidden) / output_scale_factor`` with the factor 1,
    read by the next block's group norm and SiLU."""

    def __init__(self, channels=16):
        super().__init__()
        self.conv, self.out = nn.Conv2d(channels, channels, 3, padding=1), nn.Conv2d(channels, channels, 1)
        self.norm = nn.GroupNorm(4, channels)
        nn.init.normal_(self.norm.weight)
        nn.init.normal_(self.norm.bias)
        self.output_scale_factor = 1.0

    def forward(self, x):
        total = (x + self.conv(x)) / self.output_scale_factor
        return self.out(nn.functional.silu(self.norm(total))) + total


ARGS = (torch.randn(2, 16, 6, 6),)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_division_by_one_goes_and_the_residual_add_fuses_into_the_group_norm(path):
    torch.manual_seed(0)
    module = ScaledResidualBlock().eval()
    model = export_onnx(module, ARGS, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("fuse_add_group_norm_act") == 1
    assert "Div" not in op_types(optimized)
    (got,) = run_onnx(optimized, feeds_for(model, ARGS))
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-4, atol=1e-5)


def test_a_division_by_one_goes_in_torch():
    torch.manual_seed(0)
    module = ScaledResidualBlock().eval()
    optimized, report = optimize_checked(export_torch(module, ARGS, "exported"))
    assert report.rule_counts.get("drop_divide_by_one") == 1
    assert report.rule_counts.get("fuse_add_group_norm_act") == 1
    assert not any("div" in target for target in call_targets(optimized))


def _model(op: str, constant: np.ndarray, dtype=TensorProto.FLOAT, out_rank=2):
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "c"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", dtype, [2, 3])],
        [helper.make_tensor_value_info("y", dtype, [None] * out_rank)],
        [numpy_helper.from_array(constant, "c")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


SPECIAL = np.array([[np.nan, np.inf, -np.inf], [-0.0, 1e-45, -3.0]], np.float32)


@pytest.mark.parametrize("op", ["Mul", "Div"])
def test_a_scalar_one_goes_and_every_value_comes_out_as_it_went_in(op):
    model = _model(op, np.array(1.0, np.float32))
    optimized, _ = optimize_checked(model)
    assert op_types(optimized) == ["Tanh"]
    (got,), (want,) = run_onnx(optimized, {"x": SPECIAL}), run_onnx(model, {"x": SPECIAL})
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize(
    ("op", "constant", "out_rank"),
    [
        ("Div", np.array(2.0, np.float32), 2),  # (not one)
        ("Mul", np.ones((1, 1, 1), np.float32), 3),  # (a one that adds a dim)
        ("Mul", np.ones((2, 3), np.float32), 2),  # (ones, not a scalar)
    ],
)
def test_these_stay(op, constant, out_rank):
    optimized, _ = optimize_checked(_model(op, constant, out_rank=out_rank))
    assert op in op_types(optimized)
    (got,) = run_onnx(optimized, {"x": np.ones((2, 3), np.float32)})
    assert got.ndim == out_rank
