"""recognize_group_norms: the exporters' Reshape → InstanceNormalization → Reshape → Mul → Add becomes one
group norm; unfused, it goes back exactly as it came."""

import pytest
from exporting import ONNX_PATHS, export_onnx, near_misses, op_types, optimize_checked
from group_norm_models import GroupNormAct, inputs, instance_norm_graph

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
    optimized, report = optimize_checked(
        model, input_shapes={"input_0": (3, 16, 6, 6), "input_1": (3, 16, 6, 6)}
    )
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
