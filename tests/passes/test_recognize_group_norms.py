"""recognize_group_norms: the exporters' Reshape → InstanceNormalization → Reshape → Mul → Add becomes one
group norm, and so does a bare InstanceNormalization (one group per channel); unfused, it goes back exactly
as it came."""

import numpy as np
import onnx
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
from group_norm_models import GroupNormAct, inputs, instance_norm_graph, silu_nodes
from onnx import TensorProto, helper

import graphopt


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_both_exporters_spelling_is_one_group_norm_with_its_scale_and_bias(path):
    model = export_onnx(GroupNormAct(act="silu"), inputs()[:1], path)
    assert op_types(model).count("InstanceNormalization") == 1
    _, report = optimize_checked(model, only=["fold_constants", "fold_shape_inputs", "recognize_group_norms"])
    counts = report.rule_counts
    assert counts["group_norm_from_instance_norm"] == 1
    assert counts["fold_group_norm_scale"] == counts["fold_group_norm_bias"] == 1


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_group_norm_without_an_activation_goes_back_as_it_came(path):
    model = export_onnx(GroupNormAct(act=None), inputs()[:1], path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["group_norm_from_instance_norm"] == 1
    assert report.rule_counts["restore[group_norm]"] == 1
    unrecognized, _ = graphopt.optimize(model, skip=["recognize_group_norms"], verify=False)
    assert sorted(op_types(optimized)) == sorted(op_types(unrecognized))  # (constants may move up)
    assert op_types(optimized).count("InstanceNormalization") == 1


def test_a_group_norm_with_a_dynamic_batch_is_recognized():
    model = export_onnx(GroupNormAct(act="silu"), inputs()[:1], "torchscript", dynamic_shapes=[(0,)])
    optimized, report = optimize_checked(model, input_shapes={"input_0": (3, 16, 6, 6)})
    assert report.rule_counts["group_norm_from_instance_norm"] == 1
    assert "GroupNormAct" in op_types(optimized)


@pytest.mark.parametrize(
    ("graph", "reason"),
    [
        (lambda: instance_norm_graph(norm_scale=2.0), "scales or shifts its groups"),
        (lambda: instance_norm_graph(split=(0, 4, 36)), "does not view 'x' as"),
        (
            lambda: instance_norm_graph(split=(0, 4, -1), x_shape=(2, 6, 2, 2)),
            "6 channels, which do not split into 4",
        ),
        (lambda: instance_norm_graph(merge=(2, 16, 9)), "does not reshape back to the shape of 'x'"),
    ],
    ids=["scaled_instance_norm", "fixed_group_length", "odd_groups", "other_shape"],
)
def test_near_misses_are_named_and_the_graph_kept(graph, reason):
    optimized, report = optimize_checked(graph())
    assert "group_norm_from_instance_norm" not in report.rule_counts
    assert any(reason in r for r in near_misses(report, "group_norm_from_instance_norm"))
    assert "GroupNormAct" not in op_types(optimized)


def test_a_scale_that_is_not_per_channel_stays_out_and_the_norm_goes_back():
    optimized, report = optimize_checked(instance_norm_graph(w_shape=(1, 1, 3, 3)))
    assert report.rule_counts["group_norm_from_instance_norm"] == 1
    assert any("is not one value per channel" in r for r in near_misses(report, "fold_group_norm_scale"))
    assert "fuse_group_norm_act" not in report.rule_counts
    assert report.rule_counts["restore[group_norm]"] == 1
    assert "InstanceNormalization" in op_types(optimized)


class ChannelNormAct(torch.nn.Module):
    """conv1d → a norm with one group per channel (wav2vec2's feature extractor: ``GroupNorm(C, C)``; or
    ``InstanceNorm1d`` with its own scale and bias) → activation → conv1d, on [N, C, L]."""

    def __init__(self, norm: str, act: str = "gelu", channels: int = 8):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv1d(1, channels, 5, stride=2)
        if norm == "group":
            self.norm = torch.nn.GroupNorm(channels, channels, eps=1e-5)
        else:
            self.norm = torch.nn.InstanceNorm1d(channels, eps=1e-5, affine=True)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.3 * torch.randn(channels, generator=gen))
            self.norm.bias.copy_(0.3 * torch.randn(channels, generator=gen))
        self.act = {"gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu, None: lambda t: t}[
            act
        ]
        self.out = torch.nn.Conv1d(channels, channels, 3)

    def forward(self, x):
        return self.out(self.act(self.norm(self.conv(x))))


def _waves(batch=2, length=200, seed=3):
    return (torch.randn(batch, 1, length, generator=torch.Generator().manual_seed(seed)),)


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("norm", ["group", "instance"])
def test_one_group_per_channel_fuses_with_its_activation(path, norm):
    """The reshapes around the instance norm are no-ops with one group per channel: the dynamo exporter
    leaves them out (and ``InstanceNorm1d`` never had them), so the bare InstanceNormalization is the norm."""
    module = ChannelNormAct(norm)
    model = export_onnx(module, _waves(), path)
    optimized, report = optimize_checked(model)
    recognized = report.rule_counts.get("group_norm_from_bare_instance_norm", 0)
    recognized += report.rule_counts.get("group_norm_from_instance_norm", 0)
    assert recognized == 1 and report.rule_counts["fuse_group_norm_act"] == 1
    assert op_types(optimized).count("GroupNormAct") == 1
    assert not {"InstanceNormalization", "Gelu", "Erf"} & set(op_types(optimized))
    reference = float64_reference(module, _waves())[0]
    got = run_onnx(optimized, feeds_for(optimized, _waves()))[0]
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_bare_instance_norm_with_no_activation_goes_back_as_it_came(path):
    model = export_onnx(ChannelNormAct("instance", act=None), _waves(), path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["group_norm_from_bare_instance_norm"] == 1
    assert report.rule_counts["restore[group_norm]"] == 1
    unrecognized, _ = graphopt.optimize(model, skip=["recognize_group_norms"], verify=False)
    assert sorted(op_types(optimized)) == sorted(op_types(unrecognized))


def _instance_norm_of_inputs() -> onnx.ModelProto:
    """InstanceNormalization whose scale and bias are the model's inputs, then SiLU."""
    shape = [2, 4, 5]
    graph = helper.make_graph(
        [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], epsilon=1e-5), *silu_nodes("n")],
        "instance_norm_of_inputs",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
            for n, s in (("x", shape), ("s", [4]), ("b", [4]))
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_an_instance_norm_scaled_at_run_time_is_a_near_miss_and_kept():
    optimized, report = optimize_checked(_instance_norm_of_inputs())
    assert "group_norm_from_bare_instance_norm" not in report.rule_counts
    assert any("at run time" in r for r in near_misses(report, "group_norm_from_bare_instance_norm"))
    assert "InstanceNormalization" in op_types(optimized) and "GroupNormAct" not in op_types(optimized)
