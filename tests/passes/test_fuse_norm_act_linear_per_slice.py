"""The per-feature split → stack model (each feature its own LayerNorm, then a shared Linear(D, 1) or
each feature's own Linear(D, K)) becomes a view and one NormActLinear reading per-slice norm
parameters, weight matrices and biases, through both ONNX exporters and torch.export; the rewritten
model computes what the original does in ONNX Runtime (graphopt's kernels and the fallback functions)
and in torch. Linear layers the kernel cannot read stay, with a near miss naming why."""

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
from onnx import TensorProto, helper, numpy_helper

from models.per_feature_split import PerFeatureSplitStack, example_inputs

N, B, D = 32, 3, 16
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def fallback_outputs(model, feeds):
    """The model in ONNX Runtime without graphopt's library: the fused ops' fallback functions run."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_matches(got, want, dtype=torch.float32):
    tol = TOLERANCE[dtype]
    got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


def initializer_shapes(model, node):
    dims = {i.name: list(i.dims) for i in model.graph.initializer}
    return [dims.get(name) for name in node.input[1:]]


@pytest.mark.parametrize(
    ("hidden", "shapes"),
    [
        (None, [[N, 1, D], [N, 1, D], [1, D], [1]]),  # a shared Linear(D, 1)
        (4, [[N, 1, D], [N, 1, D], [N, 4, D], [N, 1, 4]]),  # each feature's own Linear(D, 4)
    ],
)
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_per_feature_model_is_a_view_and_one_kernel(path, hidden, shapes):
    module, args = PerFeatureSplitStack(N, B, D, hidden=hidden).eval(), example_inputs(N, B, D)
    model = export_onnx(module, args, path)

    optimized, report = optimize_checked(model)

    assert op_types(optimized) == ["Reshape", "NormActLinear"]
    node = optimized.graph.node[-1]
    assert initializer_shapes(optimized, node) == shapes
    assert report.rule_counts["fuse_norm_scale_bias_act"] == 1
    feeds, (expected,) = feeds_for(model, args), float64_reference(module, args)
    assert_matches(run_onnx(optimized, feeds)[0], expected)
    assert_matches(fallback_outputs(optimized, feeds)[0], expected)


@pytest.mark.parametrize("hidden", [None, 4])
@pytest.mark.parametrize("form", TORCH_FORMS)
def test_per_feature_model_through_torch_export(form, hidden):
    module, args = PerFeatureSplitStack(N, B, D, hidden=hidden).eval(), example_inputs(N, B, D)

    optimized, _ = optimize_checked(export_torch(module, args, form))

    assert call_targets(optimized) == ["aten.reshape.default", "graphopt.norm_act_linear.default"]
    with torch.no_grad():
        assert_matches(optimized.module()(*args), float64_reference(module, args)[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("hidden", [None, 4])
def test_16_bit_per_feature_model(dtype, hidden):
    module = PerFeatureSplitStack(N, B, D, hidden=hidden).eval().to(dtype)
    args = tuple(a.to(dtype) for a in example_inputs(N, B, D))

    optimized, _ = optimize_checked(export_torch(module, args, "exported"))

    assert call_targets(optimized) == ["aten.reshape.default", "graphopt.norm_act_linear.default"]
    with torch.no_grad():
        assert_matches(optimized.module()(*args), float64_reference(module, args)[0], dtype)


def test_float16_per_feature_model_in_onnx_runtime():
    module = PerFeatureSplitStack(N, B, D, hidden=4).eval().half()
    args = tuple(a.half() for a in example_inputs(N, B, D))
    model = export_onnx(module, args, "dynamo")

    optimized, _ = optimize_checked(model)

    assert op_types(optimized) == ["Reshape", "NormActLinear"]
    feeds, (expected,) = feeds_for(model, args), float64_reference(module, args)
    assert_matches(run_onnx(optimized, feeds)[0], expected, torch.float16)
    assert_matches(fallback_outputs(optimized, feeds)[0], expected, torch.float16)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_wide_per_feature_linears_stay_with_the_matmul(path):
    module, args = PerFeatureSplitStack(N, B, D, hidden=64).eval(), example_inputs(N, B, D)
    optimized, report = optimize_checked(export_onnx(module, args, path))
    assert op_types(optimized) == ["Reshape", "NormAct", "MatMul", "Add"]
    assert any("64 output features" in r for r in near_misses(report, "fuse_norm_act_matmul_bias"))


def norm_tanh_matmul(x_shape, weight, bias=None):
    """x → LayerNorm → tanh → MatMul(w) (→ Add(c)), float32, hand-built."""
    d = x_shape[-1]
    y_shape = list(
        np.broadcast_shapes(np.empty((*x_shape[:-1], 1)).shape, np.empty(weight).shape[:-2] + (1, 1))
    )
    y_shape[-1] = weight[-1]
    if bias:
        y_shape = list(np.broadcast_shapes(tuple(y_shape), bias))
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s", "b"], ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("MatMul", ["t", "w"], ["m" if bias else "y"]),
    ]
    constants = {"s": rng.standard_normal(d), "b": rng.standard_normal(d), "w": rng.standard_normal(weight)}
    if bias:
        nodes.append(helper.make_node("Add", ["m", "c"], ["y"]))
        constants["c"] = rng.standard_normal(bias)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(a.astype(np.float32), name) for name, a in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_hand_built_per_slice_weights_fuse():
    model = norm_tanh_matmul([4, 3, 8], (4, 8, 2), bias=(4, 1, 2))
    optimized, _ = optimize_checked(model)
    assert op_types(optimized) == ["NormActLinear"]
    x = np.random.default_rng(1).standard_normal((4, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(
        run_onnx(optimized, {"x": x})[0], run_onnx(model, {"x": x})[0], rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    ("x", "weight", "why"),
    [
        # matrices over two blocks of X's leading dims (a valid matmul broadcast)
        ([2, 3, 4, 5, 8], (2, 1, 4, 8, 2), "leading dims [2, 1, 4] do not pick one matrix per block"),
        # matrices that add a dim to the output ([3, 8] @ [2, 8, 2] is [2, 3, 2])
        ([3, 8], (2, 8, 2), "leading dims [2] do not pick one matrix per block of X's rows [3]"),
    ],
)
def test_weights_the_kernel_cannot_read_stay(x, weight, why):
    optimized, report = optimize_checked(norm_tanh_matmul(x, weight))
    assert op_types(optimized) == ["NormAct", "MatMul"]
    reasons = near_misses(report, "fuse_norm_act_matmul")
    assert any("weight 'w'" in r and why in r for r in reasons), reasons


def test_a_bias_the_kernel_cannot_read_stays_outside_it():
    # [4, 1, 1] on [4, 3, 2]: one value per feature for all outputs; the kernel reads [K] per row block
    optimized, report = optimize_checked(norm_tanh_matmul([4, 3, 8], (8, 2), bias=(4, 1, 1)))
    assert op_types(optimized) == ["NormActLinear", "Add"]
    reasons = near_misses(report, "fuse_norm_act_matmul_bias")
    assert any("bias 'c' of shape [4, 1, 1] is not one value per output feature" in r for r in reasons), (
        reasons
    )


def test_a_norm_act_scale_of_unknown_length_keeps_the_linear_apart():
    # A NormAct read back from a file, its scale a graph input whose length is not known.
    d = 8
    nodes = [
        helper.make_node(
            "NormAct",
            ["x", "s"],
            ["h"],
            domain="graphopt",
            norm="layer",
            activation="tanh",
            epsilon=1e-5,
            axis=-1,
        ),
        helper.make_node("MatMul", ["h", "w"], ["y"]),
    ]
    w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((d, 2)).astype(np.float32), "w")
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, d]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["d"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
        [w],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("graphopt", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    optimized, report = optimize_checked(model, input_shapes={"s": [d]})
    assert op_types(optimized) == ["NormAct", "MatMul"]
    reasons = near_misses(report, "fuse_norm_act_matmul")
    assert any("scale 's' cannot be read row by row: shape ['d'] does not end in" in r for r in reasons), (
        reasons
    )
