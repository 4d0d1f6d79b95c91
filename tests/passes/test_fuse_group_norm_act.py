"""fuse_group_norm_act: group norm → activation (with a residual add in front) becomes GroupNormAct, through
both ONNX exporters, torch.export and ONNX's GroupNormalization (opset 18 per-group and 21 per-channel
scales); what it cannot fuse is named."""

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
from graphopt.passes.fuse import fuse_group_norm_act
from group_norm_models import GroupNormAct, inputs, onnx_model, silu_nodes
from onnx import helper

import graphopt
from graphopt.errors import BadInput
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.ir import DType, Graph, Op, Tensor

FUSED_TARGETS = ("graphopt.group_norm_act.default", "graphopt.add_group_norm_act.default")


def fused_nodes(model):
    return [n for n in model.graph.node if n.op_type == "GroupNormAct"]


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("act", ["silu", "gelu", "relu"])
def test_exported_group_norm_and_activation_fuse(path, act):
    module, args = GroupNormAct(act=act), inputs()[:1]
    model = export_onnx(module, args, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["fuse_group_norm_act"] == 1
    (node,) = fused_nodes(optimized)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert (
        attrs["groups"] == 4
        and attrs["activation"] == act.encode()
        and len([i for i in node.input if i]) == 3
    )
    assert "InstanceNormalization" not in op_types(optimized)
    (out,) = run_onnx(optimized, feeds_for(optimized, args))
    np.testing.assert_allclose(out, float64_reference(module, args)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_torch_export_group_norm_and_activation_fuse(form):
    module, args = GroupNormAct(act="silu", residual=True, keep_sum=True), inputs()
    optimized, report = optimize_checked(export_torch(module, args, form))
    assert report.rule_counts["fuse_add_group_norm_act"] == 1
    targets = call_targets(optimized)
    assert targets.count("graphopt.add_group_norm_act.default") == 1
    assert not any("group_norm" in t and t not in FUSED_TARGETS for t in targets)
    out = optimized.module()(*args)
    np.testing.assert_allclose(out.detach().numpy(), float64_reference(module, args)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("keep_sum", [True, False])
def test_residual_add_folds_in_with_its_sum(path, keep_sum):
    model = export_onnx(GroupNormAct(act="silu", residual=True, keep_sum=keep_sum), inputs(), path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["fuse_add_group_norm_act"] == 1
    (node,) = fused_nodes(optimized)
    assert len([i for i in node.input if i]) == 4 and len(node.output) == 2


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_from_opset_21_fuses(opset):
    rng = np.random.default_rng(opset)
    weights = {
        k: (f + 0.3 * rng.standard_normal(16)).astype(np.float32) for k, f in (("scale", 1.0), ("bias", 0.0))
    }
    norm = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["h"], num_groups=4, epsilon=1e-5)
    model = onnx_model([norm, *silu_nodes("h")], weights, [2, 16, 3, 3], opset=opset)
    if opset < 21:
        # ONNX deprecates GroupNormalization-18, whose scale is per group: its checker refuses the model.
        with pytest.raises(BadInput, match="GroupNormalization is deprecated"):
            graphopt.optimize(model)
        return
    # The check is given standard-normal inputs: on groups with a large common offset ONNX Runtime's
    # GroupNormalization-21 is off by 0.34 (its variance cancels) where the fused op is off by 3e-7.
    rng = np.random.default_rng(3)
    normal = rng.standard_normal((2, 16, 3, 3)).astype(np.float32)
    optimized, report = optimize_checked(model, inputs={"x": normal})
    assert report.rule_counts["fuse_group_norm_act"] == 1 and op_types(optimized) == ["GroupNormAct"]
    offset = (100.0 + 0.1 * rng.standard_normal((2, 16, 3, 3))).astype(np.float32)
    for x in (normal, offset):
        scale, bias = weights.values()
        expected, _ = GROUP_NORM_ACT.reference(x, scale, bias, groups=4, activation="silu", epsilon=1e-5)
        (out,) = run_onnx(optimized, {"x": x})
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_a_per_group_scale_is_repeated_over_its_channels():
    """Op.GROUP_NORM's scale and bias may hold one value per group (GroupNormalization before opset 21)."""
    graph = Graph()
    x = graph.add_input("x", DType.FLOAT32, (2, 6, 5))
    scale = graph.add_constant(Tensor.from_array(np.asarray([2.0, 3.0, 4.0], np.float32)), "scale")
    bias = graph.add_constant(Tensor.from_array(np.asarray([0.5, 0.0, -0.5], np.float32)), "bias")
    norm = graph.add_node(Op.GROUP_NORM, [x, scale, bias], {"groups": 3, "eps": 1e-5})
    graph.set_outputs([graph.add_node(Op.SILU, [norm.output]).output])
    assert fuse_group_norm_act.PASS.run(graph).counts == {"fuse_group_norm_act": 1}
    (fused,) = [n for n in graph if n.op == Op.GROUP_NORM_ACT]
    np.testing.assert_array_equal(fused.input(1).const.numpy(), [2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(fused.input(2).const.numpy(), [0.5, 0.5, 0, 0, -0.5, -0.5])


class AddThenNorm(torch.nn.Module):
    """The norm in front of a VAE's attention: the residual stream's sum, normalized, with no activation."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(4, 16, eps=1e-6)
        self.proj = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x, r):
        s = x + r
        return self.proj(self.norm(s)) + s


@pytest.mark.parametrize("path", [*ONNX_PATHS, "exported"])
def test_residual_add_before_a_norm_without_activation_fuses(path):
    module, args = AddThenNorm(), inputs()
    model = export_torch(module, args, path) if path == "exported" else export_onnx(module, args, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["fuse_add_group_norm"] == 1
    if path == "exported":
        assert call_targets(optimized).count("graphopt.add_group_norm_act.default") == 1
    else:
        (node,) = fused_nodes(optimized)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attrs["activation"] == b"identity" and len(node.output) == 2


class NormReadTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(4, 16)

    def forward(self, x, r):
        h = self.norm(x + r)
        return torch.nn.functional.silu(h) + h


class BroadcastAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(4, 16)

    def forward(self, x, r):
        return torch.nn.functional.silu(self.norm(x + r[:1]))


class RuntimeWeight(torch.nn.Module):
    def forward(self, x, r):
        return torch.nn.functional.silu(torch.nn.functional.group_norm(x, 4, r[0, :, 0, 0]))


@pytest.mark.parametrize(
    ("module", "rule", "reason"),
    [
        (NormReadTwice, "fuse_add_group_norm_act", "is also read outside the fused region"),
        (RuntimeWeight, "fuse_group_norm_act", "is computed at run time"),
    ],
    ids=["norm_read_twice", "runtime_weight"],
)
def test_near_misses_are_named(module, rule, reason):
    _, report = optimize_checked(export_torch(module(), inputs(), "exported"))
    assert any(reason in r for r in near_misses(report, rule)), near_misses(report, rule)
    assert report.rule_counts.get("fuse_add_group_norm_act", 0) == 0
    assert report.rule_counts.get("fuse_group_norm_act", 0) == 0


def test_a_broadcasting_add_stays_outside_the_fused_norm():
    optimized, report = optimize_checked(export_torch(BroadcastAdd(), inputs(), "exported"))
    assert report.rule_counts["fuse_group_norm_act"] == 1
    assert "fuse_add_group_norm_act" not in report.rule_counts
    assert call_targets(optimized).count("graphopt.group_norm_act.default") == 1


def test_float64_is_left_alone():
    module = torch.nn.Sequential(torch.nn.GroupNorm(4, 16), torch.nn.SiLU()).double()
    optimized, report = optimize_checked(export_torch(module, inputs(dtype=torch.float64)[:1], "exported"))
    assert any("is float64" in r for r in near_misses(report, "fuse_group_norm_act"))
    assert "aten.group_norm.default" in call_targets(optimized)
    assert not any(t in FUSED_TARGETS for t in call_targets(optimized))
