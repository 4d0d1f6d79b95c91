import numpy as np
import pytest
import torch
from exporting import ONNX_PATHS, call_targets, export_torch, float64_reference, op_types, optimize_checked
from graphopt.passes.canonicalize import JOIN_SLICES_INTO_SPLIT
from onnx import TensorProto, helper, numpy_helper

import graphopt
from models import zoo
from models.zoo_modules import ClassToken


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_the_class_token_and_the_patch_tokens_of_a_fused_norm_are_one_split(path):
    entry = zoo.get(f"class_token.{path}")
    optimized, report = optimize_checked(entry.build())
    assert report.rule_counts.get("fuse_add_norm") == 1
    assert report.rule_counts.get(JOIN_SLICES_INTO_SPLIT.name) == 1
    ops = op_types(optimized)
    assert "Slice" not in ops and ops.count("Split") == 1
    got = graphopt.ort.create_session(optimized).run(None, entry.inputs())
    for mine, want in zip(got, entry.expected(), strict=True):
        np.testing.assert_allclose(mine, want, rtol=1e-5, atol=1e-5)


def test_through_torch_export_too():
    torch.manual_seed(0)
    module, x = ClassToken().eval(), (torch.randn(2, 5, 16),)
    optimized, report = optimize_checked(export_torch(module, x, "export"))
    assert report.rule_counts.get(JOIN_SLICES_INTO_SPLIT.name) == 1
    targets = call_targets(optimized)
    assert "aten.slice.Tensor" not in targets
    assert any(t.startswith("aten.split") for t in targets), targets
    for mine, want in zip(optimized.module()(*x), float64_reference(module, x), strict=True):
        np.testing.assert_allclose(mine.detach().numpy(), want, rtol=1e-5, atol=1e-5)


def _sliced(bounds, axes=None, length=6, one_output=False):
    """x [2, length, 4] → Split into [.., 3] and [.., 1] (both read: a node of two outputs), or Relu with
    ``one_output`` → a Slice of the first per (start, end) on ``axes`` (default 1), each an output."""
    axes = axes or [1] * len(bounds)
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [2], [3, 1])
    initializers, outputs = [sizes], []
    if one_output:
        nodes = [helper.make_node("Relu", ["x"], ["r"])]
        width = 4
    else:
        nodes = [helper.make_node("Split", ["x", "sizes"], ["r", "rest"], axis=2)]
        outputs.append(helper.make_tensor_value_info("rest", TensorProto.FLOAT, [2, length, 1]))
        width = 3
    for i, ((start, end), axis) in enumerate(zip(bounds, axes, strict=True)):
        for name, v in (("s", start), ("e", end), ("a", axis)):
            initializers.append(helper.make_tensor(f"{name}{i}", TensorProto.INT64, [1], [v]))
        nodes.append(helper.make_node("Slice", ["r", f"s{i}", f"e{i}", f"a{i}"], [f"y{i}"]))
        shape = [2, length, width]
        shape[axis] = len(range(shape[axis])[start:end])
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, shape))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, length, 4])
    graph = helper.make_graph(nodes, "g", [x], outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _ops_after(model):
    optimized, _ = graphopt.optimize(model)
    return op_types(optimized)


def test_pieces_in_any_order_and_an_open_end_are_joined_in_order_along_the_axis():
    model = _sliced([(4, 2**62), (0, 1), (1, 4)])
    optimized, report = graphopt.optimize(model)
    assert report.verification["ok"]
    (split,) = [n for n in optimized.graph.node if n.op_type == "Split" and n.input[0] != "x"]
    assert "Slice" not in op_types(optimized)
    assert {a.name: helper.get_attribute_value(a) for a in split.attribute} == {"axis": 1}
    sizes = {t.name: numpy_helper.to_array(t) for t in optimized.graph.initializer}[split.input[1]]
    assert sizes.tolist() == [1, 3, 2]
    x = np.random.default_rng(0).standard_normal((2, 6, 4)).astype(np.float32)
    got = graphopt.ort.create_session(optimized).run(None, {"x": x})
    r = x[..., :3]
    for mine, want in zip(got, [x[..., 3:], r[:, 4:], r[:, :1], r[:, 1:4]], strict=True):
        np.testing.assert_array_equal(mine, want)


@pytest.mark.parametrize(
    ("bounds", "axes"),
    [
        ([(0, 2), (3, 6)], None),  # a gap
        ([(0, 4), (3, 6)], None),  # an overlap
        ([(0, 5)], None),  # one piece
        ([(1, 6), (0, 1)], [1, 2]),  # two axes
        ([(0, 2), (2, 5)], None),  # not to the end
    ],
)
def test_slices_that_do_not_tile_one_axis_stay(bounds, axes):
    ops = _ops_after(_sliced(bounds, axes))
    assert ops.count("Slice") == len(bounds) and ops.count("Split") == 1  # (the producer)


def test_slices_of_a_one_output_node_are_left_to_the_runtime():
    """ONNX Runtime joins those itself, with its other fusions in view (FocalNet: two more Splits when
    graphopt joined them first)."""
    ops = _ops_after(_sliced([(0, 1), (1, 6)], one_output=True))
    assert ops.count("Slice") == 2 and "Split" not in ops
