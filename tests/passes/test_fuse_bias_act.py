import math

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
from graphopt.passes.fuse.fuse_bias_act import SPLIT_LINEAR_BIAS
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import graphopt
from graphopt.ir import Op

FUSED_RULES = ("fuse_bias_act", "fuse_bias_act[bias_first]", "fuse_bias_act_through_view")


def gelu_tanh_formula(h):
    """GPT-2's gelu_new, spelled out in ops as it exports."""
    return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))


ACTIVATIONS = {
    "gelu": nn.functional.gelu,
    "gelu_tanh": lambda h: nn.functional.gelu(h, approximate="tanh"),
    "gelu_tanh_formula": gelu_tanh_formula,
    "silu": nn.functional.silu,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
KIND = {"gelu_tanh_formula": "gelu_tanh"}


class LinearAct(nn.Module):
    """An MLP's first layer and its activation, then the second layer (which has nothing to fuse)."""

    def __init__(self, act="gelu", d=16, hidden=48):
        super().__init__()
        self.up, self.down, self.act = nn.Linear(d, hidden), nn.Linear(hidden, d), ACTIVATIONS[act]

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class Conv1DAct(nn.Module):
    """GPT-2's Conv1D: addmm on the flattened rows, viewed back, then the activation."""

    def __init__(self, d=16, hidden=48):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, hidden) * 0.2)
        self.bias = nn.Parameter(torch.randn(hidden))

    def forward(self, x):
        rows = torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight)
        return gelu_tanh_formula(rows.view(*x.shape[:-1], -1))


def args():
    return (torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0)),)


def affine_acts(model):
    return [n for n in model.graph.node if n.op_type == "AffineAct"]


def attributes(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


FUSED_GEMM = ("relu", "sigmoid", "tanh")  # (ONNX Runtime folds MatMul + Add + these into one FusedGemm)


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("act", FUSED_GEMM)
def test_matmul_bias_and_an_activation_onnx_runtime_fuses_stay(act, path):
    optimized, report = optimize_checked(export_onnx(LinearAct(act).eval(), args(), path))
    assert not affine_acts(optimized)
    assert any("FusedGemm" in r for rule in FUSED_RULES for r in near_misses(report, rule))


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a not in FUSED_GEMM])
def test_matmul_bias_activation_fuse_in_onnx(act, path):
    torch.manual_seed(0)
    module = LinearAct(act).eval()
    model = export_onnx(module, args(), path)
    optimized, report = optimize_checked(model)
    (node,) = affine_acts(optimized)
    assert attributes(node) == {"activation": KIND.get(act, act).encode(), "axis": -1}
    computed = [t for t in op_types(optimized) if t != "Constant"]
    assert computed == ["MatMul", "AffineAct", "MatMul", "Add"]
    assert sum(report.rule_counts.get(r, 0) for r in FUSED_RULES) == 1
    (got,) = run_onnx(optimized, feeds_for(optimized, args()))
    (want,) = float64_reference(module, args())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_gpt2_conv1d_keeps_its_bias_in_addmm_and_its_gelu_formula_fuses(form):
    module = Conv1DAct().eval()
    program = export_torch(module, args(), form)
    optimized, report = optimize_checked(program)
    assert report.rule_counts.get("fuse_spelled_activation") == 1
    assert "aten.addmm.default" in call_targets(optimized)
    assert "graphopt.affine_act.default" in call_targets(optimized)
    assert not any("tanh" in t or "pow" in t for t in call_targets(optimized))
    (want,) = float64_reference(module, args())
    np.testing.assert_allclose(optimized.module()(*args()).detach().numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", TORCH_FORMS)
def test_a_linear_with_its_own_bias_keeps_it_in_torch(form):
    module = LinearAct("gelu").eval()
    program = export_torch(module, args(), form)
    optimized, report = optimize_checked(program)
    assert not any(report.rule_counts.get(r) for r in FUSED_RULES)
    assert call_targets(optimized) == call_targets(program)


def test_split_linear_bias_moves_the_bias_into_the_activation():
    from graphopt.frontends.torch_export import from_exported_program

    graph = from_exported_program(export_torch(LinearAct("silu").eval(), args(), "exported"))
    stats = SPLIT_LINEAR_BIAS.run(graph)
    assert stats.counts == {"split_linear_bias_act": 1}
    (fused,) = graph.nodes_of(Op.AFFINE_ACT)
    producer = fused.input(0).producer
    assert producer.op == Op.LINEAR and producer.input(2) is None
    assert fused.input(2).shape == (48,) and fused.attrs == {"activation": "silu", "axis": -1}


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_float16_bias_activation_fuses_and_matches(path):
    module = LinearAct("gelu").eval().half()
    x = args()[0].half()
    model = export_onnx(module, (x,), path)
    optimized, _ = optimize_checked(model)
    assert len(affine_acts(optimized)) == 1
    (got,) = run_onnx(optimized, feeds_for(optimized, (x,)))
    (want,) = float64_reference(module, (x,))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=1e-2)


class ResidualAct(nn.Module):
    def forward(self, x, r):
        return torch.relu(x + r)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_residual_add_is_no_bias(path):
    x = args()[0]
    model = export_onnx(ResidualAct().eval(), (x, x.clone()), path)
    optimized, report = optimize_checked(model)
    assert not affine_acts(optimized)
    assert not near_misses(report, "fuse_bias_act")


def add_act_model(bias_shape, *, bias_input=False, dtype=TensorProto.FLOAT, opset=18, view=None):
    """x [2, 5, 8] + bias → (Reshape →) Relu, hand-built; ``bias_input``: the bias is a graph input."""
    numpy_type = helper.tensor_dtype_to_np_dtype(dtype)
    inputs = [helper.make_tensor_value_info("x", dtype, [2, 5, 8])]
    initializers = []
    if bias_input:
        inputs.append(helper.make_tensor_value_info("bias", dtype, list(bias_shape)))
    else:
        initializers.append(
            numpy_helper.from_array(np.linspace(-1, 1, 8).reshape(bias_shape).astype(numpy_type), "bias")
        )
    nodes = [helper.make_node("Add", ["x", "bias"], ["sum"])]
    last = "sum"
    if view is not None:
        initializers.append(numpy_helper.from_array(np.array(view, np.int64), "shape"))
        nodes.append(helper.make_node("Reshape", ["sum", "shape"], ["viewed"]))
        last = "viewed"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", dtype, list(view or (2, 5, 8)))], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def optimize_hand_built(model):
    optimized, report = graphopt.optimize(model)
    assert report.verification["ok"]
    return optimized, report


def test_a_bias_of_leading_ones_becomes_a_vector():
    optimized, _ = optimize_hand_built(add_act_model((1, 1, 8)))
    (node,) = affine_acts(optimized)
    bias = {i.name: i for i in optimized.graph.initializer}[node.input[2]]
    assert list(bias.dims) == [8]


def test_a_bias_computed_at_run_time_with_leading_ones_stays():
    _, report = optimize_hand_built(add_act_model((1, 8), bias_input=True))
    assert any("computed at run time" in r for r in near_misses(report, "fuse_bias_act"))


def test_a_bias_vector_given_at_run_time_fuses():
    optimized, _ = optimize_hand_built(add_act_model((8,), bias_input=True))
    assert len(affine_acts(optimized)) == 1


def test_float64_stays():
    optimized, report = optimize_hand_built(add_act_model((8,), dtype=TensorProto.DOUBLE))
    assert not affine_acts(optimized)
    assert any("float64" in r for r in near_misses(report, "fuse_bias_act"))


def test_below_opset_13_stays():
    optimized, report = optimize_hand_built(add_act_model((8,), opset=12))
    assert not affine_acts(optimized)
    assert any("opset 12" in r for r in near_misses(report, "fuse_bias_act"))


def test_a_view_that_keeps_the_last_dim_moves_before_the_fused_op():
    optimized, report = optimize_hand_built(add_act_model((8,), view=[10, 8]))
    assert report.rule_counts.get("fuse_bias_act_through_view") == 1
    assert [t for t in op_types(optimized) if t != "Constant"] == ["Reshape", "AffineAct"]


def test_a_view_that_changes_the_last_dim_stays():
    optimized, report = optimize_hand_built(add_act_model((8,), view=[5, 16]))
    assert not affine_acts(optimized)
    assert any("changes the last dim" in r for r in near_misses(report, "fuse_bias_act_through_view"))


def test_a_single_activation_op_alone_stays():
    """One Gelu node is one kernel already; only an activation spelled in several ops is taken alone."""
    graph = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    optimized, report = optimize_hand_built(model)
    assert op_types(optimized) == ["Gelu"]
    assert not report.rule_counts.get("fuse_spelled_activation")


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_spelled_out_gelu_with_nothing_before_it_becomes_one_op(path):
    class FormulaOnly(nn.Module):
        def forward(self, x):
            return gelu_tanh_formula(x)

    optimized, report = optimize_checked(export_onnx(FormulaOnly().eval(), args(), path))
    assert [t for t in op_types(optimized) if t != "Constant"] == ["AffineAct"]
    assert report.rule_counts.get("fuse_spelled_activation") == 1


class ConvSpelledAct(nn.Module):
    """EfficientNet's block: a conv, an activation the exporters spell out (SiLU as x * sigmoid(x),
    GELU's tanh formula), another conv."""

    def __init__(self, act):
        super().__init__()
        self.a, self.b, self.act = nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(16, 16, 1), ACTIVATIONS[act]

    def forward(self, x):
        return self.b(self.act(self.a(x)))


@pytest.mark.parametrize("act", ["silu", "gelu_tanh_formula"])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_a_spelled_activation_on_a_convolution_stays_as_spelled(act, path):
    model = export_onnx(ConvSpelledAct(act), (torch.randn(1, 16, 8, 8),), path)
    optimized, report = optimize_checked(model)
    assert "AffineAct" not in op_types(optimized)
    assert [t for t in op_types(optimized) if t != "Constant"] == [
        t for t in op_types(model) if t not in ("Constant", "Identity")
    ]
    (reason, *_) = near_misses(report, "fuse_spelled_activation")
    assert "convolution's output" in reason


class PositionalConv(nn.Module):
    """wav2vec2's positional conv embedding: a padded conv over time, its last step cut, GELU, back to
    [N, T, C] by a transpose."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 4, padding=2, groups=2)

    def forward(self, h):
        return nn.functional.gelu(self.conv(h.transpose(1, 2))[:, :, :-1]).transpose(1, 2)


def test_a_spelled_activation_next_to_a_transpose_stays_as_spelled():
    """ONNX Runtime moves the transposes through the elementwise GELU (spelled at opset 17) and fuses
    it, which a fused op would prevent."""
    model = export_onnx(PositionalConv(), (torch.randn(2, 6, 8),), "torchscript")  # (opset 17: GELU spelled)
    optimized, report = optimize_checked(model)
    assert "AffineAct" not in op_types(optimized) and "Erf" in op_types(optimized)
    assert any("transposes next to it" in r for r in near_misses(report, "fuse_spelled_activation"))
