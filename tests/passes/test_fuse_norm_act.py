import numpy as np
import onnx
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

F = torch.nn.functional


class NormAct(torch.nn.Module):
    def __init__(self, d=16, act="gelu", norm="layer", affine=True, shape=None):
        super().__init__()
        self.act, self.norm_kind = act, norm
        self.shape = shape or (d,)
        self.weight = torch.nn.Parameter(torch.randn(self.shape)) if affine else None
        self.bias = torch.nn.Parameter(torch.randn(self.shape)) if affine and norm != "rms" else None

    def forward(self, x):
        if self.norm_kind == "layer":
            h = F.layer_norm(x, self.shape, self.weight, self.bias, eps=1e-5)
        elif self.norm_kind == "decomposed_layer":
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            h = (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias
        else:
            h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight
        return {
            "gelu": F.gelu,
            "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
            "tanh": torch.tanh,
            "relu": torch.relu,
            "silu": F.silu,
            "sigmoid": torch.sigmoid,
        }[self.act](h)


class Residual(torch.nn.Module):
    """x + f(x) → LayerNorm → act, with the sum read again later (the transformer's residual stream)."""

    def __init__(self, d=16, act="gelu"):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
        self.act = act

    def forward(self, x):
        h = x + self.linear(x)
        y = self.norm(h)
        y = F.gelu(y) if self.act == "gelu" else y
        return self.linear(y) + h


POSITIVE = {
    "layer_gelu": (lambda: NormAct(act="gelu"), "gelu", "layer"),
    "layer_gelu_tanh": (lambda: NormAct(act="gelu_tanh"), "gelu_tanh", "layer"),
    "layer_tanh_no_affine": (lambda: NormAct(act="tanh", affine=False), "tanh", "layer"),
    "layer_relu": (lambda: NormAct(act="relu"), "relu", "layer"),
    "layer_silu": (lambda: NormAct(act="silu"), "silu", "layer"),
    "layer_sigmoid": (lambda: NormAct(act="sigmoid"), "sigmoid", "layer"),
    "layer_two_dims": (lambda: NormAct(act="tanh", shape=(4, 16)), "tanh", "layer"),
    "decomposed_layer_gelu": (lambda: NormAct(act="gelu", norm="decomposed_layer"), "gelu", "layer"),
    "rms_silu": (lambda: NormAct(act="silu", norm="rms"), "silu", "rms"),
    "residual_gelu": (lambda: Residual(act="gelu"), "gelu", "layer"),
    "residual_identity": (lambda: Residual(act=None), "identity", "layer"),
}


@pytest.mark.parametrize("path", ONNX_PATHS)
@pytest.mark.parametrize("case", sorted(POSITIVE))
def test_norm_and_activation_fuse(case, path):
    make, activation, norm = POSITIVE[case]
    module = make()
    args = (torch.randn(3, 4, 16),)
    # (the residual cases' Linear(16, 16) after the norm would join it in NormActLinear: see
    # tests/passes/test_fuse_norm_act_linear_residual.py)
    optimized, _ = optimize_checked(export_onnx(module, args, path), skip=["fuse_norm_act_linear"])
    fused = [n for n in optimized.graph.node if n.op_type == "NormAct"]
    assert len(fused) == 1, op_types(optimized)
    attrs = {a.name: helper.get_attribute_value(a) for a in fused[0].attribute}
    assert attrs["activation"].decode() == activation and attrs["norm"].decode() == norm
    assert not {"LayerNormalization", "Erf", "Gelu", "Tanh", "Sqrt", "ReduceMean"} & set(op_types(optimized))
    expected = float64_reference(module, args)
    actual = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4, atol=1e-5)


def test_decomposed_layer_norm_of_old_opsets_fuses():
    module = NormAct(act="relu")
    args = (torch.randn(5, 16),)
    model = export_onnx(module, args, "torchscript", opset=16)
    assert "LayerNormalization" not in op_types(model)
    optimized, report = optimize_checked(model)
    assert op_types(optimized).count("NormAct") == 1
    assert any(rule.startswith("layer_norm_from_ops") for rule in report.rule_counts)


def test_float16_model_fuses_and_matches():
    module = NormAct(act="gelu").half()
    args = (torch.randn(4, 16).half(),)
    optimized, _ = optimize_checked(export_onnx(module, args, "dynamo"))
    assert op_types(optimized).count("NormAct") == 1
    (expected,) = float64_reference(module, args)
    (actual,) = run_onnx(optimized, {optimized.graph.input[0].name: args[0].numpy()})
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=1e-2, atol=1e-2)


class SharedNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.norm(x)
        return torch.tanh(h), h * 2.0


class SoftmaxAfterNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.softmax(self.norm(x), dim=-1)


class RuntimeWeight(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(F.layer_norm(x, (16,), weight=x.mean(0)))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_norm_output_read_elsewhere_stays(path):
    optimized, report = optimize_checked(export_onnx(SharedNorm(), (torch.randn(3, 16),), path))
    assert "NormAct" not in op_types(optimized)
    assert any("is also read by" in r for r in near_misses(report, "fuse_norm_act"))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_non_elementwise_consumer_stays(path):
    optimized, _ = optimize_checked(export_onnx(SoftmaxAfterNorm(), (torch.randn(3, 16),), path))
    assert "NormAct" not in op_types(optimized)
    assert "LayerNormalization" in op_types(optimized)


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_weights_computed_at_run_time_stay(path):
    optimized, report = optimize_checked(export_onnx(RuntimeWeight(), (torch.randn(3, 16),), path))
    assert "NormAct" not in op_types(optimized)
    assert any("computed at run time" in r for r in near_misses(report, "fuse_norm_act"))


def hand_built(scale_shape, dtype=TensorProto.FLOAT):
    scale = helper.make_tensor("scale", dtype, scale_shape, np.ones(scale_shape).reshape(-1).tolist())
    graph = helper.make_graph(
        [
            helper.make_node("LayerNormalization", ["x", "scale"], ["h"], axis=-1, epsilon=1e-5),
            helper.make_node("Tanh", ["h"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", dtype, [2, 8])],
        [helper.make_tensor_value_info("y", dtype, [2, 8])],
        [scale],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_scale_that_broadcasts_stays():
    optimized, report = graphopt.optimize(hand_built([1]))
    assert "NormAct" not in op_types(optimized)
    assert any("normalized dims are [8]" in r for r in near_misses(report, "fuse_norm_act"))


def test_float64_stays():
    optimized, report = graphopt.optimize(hand_built([8], TensorProto.DOUBLE))
    assert "NormAct" not in op_types(optimized)
    assert any("float64" in r for r in near_misses(report, "fuse_norm_act"))


def test_fused_model_passes_the_full_checker():
    optimized, _ = optimize_checked(export_onnx(Residual(), (torch.randn(3, 16),), "dynamo"))
    onnx.checker.check_model(optimized, full_check=True)
    assert any(f.domain == "graphopt" for f in optimized.functions)


def decomposed_layer_norm_tanh(opset: int):
    """ReduceMean → Sub → Mul → ReduceMean → Add → Sqrt → Div → Tanh, axes as attributes (opset < 18)."""
    steps = [
        ("ReduceMean", ["x"], "mean", {"axes": [-1]}),
        ("Sub", ["x", "mean"], "d", {}),
        ("Mul", ["d", "d"], "square", {}),
        ("ReduceMean", ["square"], "var", {"axes": [-1]}),
        ("Add", ["var", "eps"], "shifted", {}),
        ("Sqrt", ["shifted"], "std", {}),
        ("Div", ["d", "std"], "h", {}),
        ("Tanh", ["h"], "y", {}),
    ]
    graph = helper.make_graph(
        [helper.make_node(op, inputs, [out], **attrs) for op, inputs, out, attrs in steps],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


def layer_norm_tanh_reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    centered = x - x.mean(-1, keepdims=True)
    return np.tanh(centered / np.sqrt((centered**2).mean(-1, keepdims=True) + 1e-5))


@pytest.mark.parametrize("opset", [7, 12])
def test_below_opset_13_the_norm_stays_unfused_with_a_near_miss(opset):
    model = decomposed_layer_norm_tanh(opset)
    optimized, report = optimize_checked(model)
    assert "NormAct" not in op_types(optimized)
    assert not optimized.functions
    assert [(o.domain, o.version) for o in optimized.opset_import] == [("", opset)]
    reason = f"the model imports opset {opset}; fused ops need opset 13 or newer"
    assert reason in near_misses(report, "fuse_norm_act")
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32) * 5 + 2
    (actual,) = run_onnx(optimized, {"x": x})
    np.testing.assert_allclose(actual, layer_norm_tanh_reference(x), rtol=1e-5, atol=1e-6)


def test_at_opset_13_the_norm_fuses():
    optimized, _ = optimize_checked(decomposed_layer_norm_tanh(13))
    assert op_types(optimized) == ["NormAct"]
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32) * 5 + 2
    (actual,) = run_onnx(optimized, {"x": x})
    np.testing.assert_allclose(actual, layer_norm_tanh_reference(x), rtol=1e-5, atol=1e-6)


def test_a_norm_that_is_also_a_graph_output_is_not_computed_twice():
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [8], np.linspace(0.5, 1.5, 8).tolist())
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "r"], ["s"]),
            helper.make_node("LayerNormalization", ["s", "scale"], ["h"], axis=-1, epsilon=1e-5),
            helper.make_node("Tanh", ["h"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8]) for n in ("x", "r")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8]) for n in ("y", "h")],
        [scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    optimized, report = optimize_checked(model)
    assert op_types(optimized) == ["NormAct", "Tanh"]
    assert near_misses(report, "fuse_add_norm_act") == ["'h' is a graph output"]


class ChannelNormAct(torch.nn.Module):
    """A layer norm over the channels of [N, C, T], written between transposes (speech feature
    extractors), then an activation; ``keep``: the transposed norm is also an output."""

    def __init__(self, channels=8, act="gelu", keep=False):
        super().__init__()
        self.norm, self.act, self.keep = torch.nn.LayerNorm(channels), ACTS[act], keep
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.3), self.norm.bias.normal_(0.0, 0.3)

    def forward(self, x):
        normed = self.norm(x.transpose(1, 2)).transpose(1, 2)
        return (self.act(normed), normed) if self.keep else self.act(normed)


ACTS = {"gelu": F.gelu, "silu": F.silu, "tanh": torch.tanh}


@pytest.mark.parametrize("path", [*ONNX_PATHS, "torch_export"])
@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_an_activation_after_a_transposed_norm_fuses_and_the_transpose_moves_after(path, act):
    module, x = ChannelNormAct(act=act).eval(), torch.randn(2, 8, 12) * 3 + 5
    model = torch.export.export(module, (x,)) if path == "torch_export" else export_onnx(module, (x,), path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts["fuse_norm_act_through_transpose"] == 1
    if path == "torch_export":
        targets = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
        assert "graphopt.norm_act.default" in targets and "aten.layer_norm.default" not in targets
        got = optimized.module()(x).detach().double().numpy()
    else:
        assert op_types(optimized).count("NormAct") == 1 and "LayerNormalization" not in op_types(optimized)
        got = run_onnx(optimized, {optimized.graph.input[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, float64_reference(module, (x,))[0], rtol=1e-4, atol=1e-5)


def test_a_transposed_norm_read_elsewhere_keeps_its_activation_apart():
    module, x = ChannelNormAct(keep=True).eval(), torch.randn(2, 8, 12)
    optimized, report = optimize_checked(export_onnx(module, (x,), "dynamo"))
    assert "fuse_norm_act_through_transpose" not in report.rule_counts
    assert "NormAct" not in op_types(optimized) and "LayerNormalization" in op_types(optimized)
