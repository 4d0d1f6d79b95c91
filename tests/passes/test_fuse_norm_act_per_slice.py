"""Per-slice scale and bias (per-feature norms after batching) and broadcast residuals fuse into
NormAct, through both ONNX exporters and torch.export; what the kernel cannot read stays, with a
near miss naming why."""

from collections import Counter

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
    near_misses,
    op_types,
    optimize_checked,
    run_onnx,
)
from onnx import TensorProto, helper, numpy_helper

import graphopt
from models.per_feature_split import PerFeatureSplitStack, example_inputs

N, B, D = 32, 3, 16


def _assert_matches_float64(got, module, args):
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=1e-4, atol=1e-5)


# (fuse_norm_act_linear skipped: it would take the NormAct into the linear layer's kernel, as
# tests/passes/test_fuse_norm_act_linear_per_slice.py checks)
@pytest.mark.parametrize(
    ("hidden", "ops"),
    [
        (None, ["Reshape", "NormAct", "MatMul", "Add", "Relu"]),
        (4, ["Reshape", "NormAct", "MatMul", "Add"]),  # the per-feature Linear(D, 4): one batched matmul
    ],
)
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_per_feature_norms_become_one_norm_act(path, hidden, ops):
    module, args = PerFeatureSplitStack(N, B, D, hidden=hidden).eval(), example_inputs(N, B, D)
    model = export_onnx(module, args, path)

    optimized, report = optimize_checked(model, skip=["fuse_norm_act_linear"])

    assert op_types(optimized) == ops
    norm_act = next(n for n in optimized.graph.node if n.op_type == "NormAct")
    weights = {i.name: list(i.dims) for i in optimized.graph.initializer}
    assert [weights[name] for name in norm_act.input[1:3]] == [[N, 1, D], [N, 1, D]]
    assert report.rule_counts["fuse_norm_scale_bias_act"] == 1
    _assert_matches_float64(run_onnx(optimized, feeds_for(model, args))[0], module, args)


@pytest.mark.parametrize("hidden", [None, 4])
def test_per_feature_norms_through_torch_export(hidden):
    module, args = PerFeatureSplitStack(N, B, D, hidden=hidden).eval(), example_inputs(N, B, D)

    optimized, _ = optimize_checked(export_torch(module, args, "exported"), skip=["fuse_norm_act_linear"])

    targets = call_targets(optimized)
    assert Counter(targets)["graphopt.norm_act.default"] == 1
    assert not any("layer_norm" in t or "tanh" in t for t in targets)
    with torch.no_grad():
        _assert_matches_float64(optimized.module()(*args).numpy(), module, args)


class PositionResidual(torch.nn.Module):
    """x + a position embedding that broadcasts over the batch → LayerNorm (→ GELU)."""

    def __init__(self, shape, d=64, act=False):
        super().__init__()
        self.position = torch.nn.Parameter(torch.randn(shape))
        self.norm = torch.nn.LayerNorm(d)
        self.act = act

    def forward(self, x):
        y = self.norm(x + self.position)
        return torch.nn.functional.gelu(y) if self.act else y


@pytest.mark.parametrize(
    ("x_shape", "r_shape"),
    [((2, 16, 64), (1, 16, 64)), ((2, 32, 64), (32, 64))],
    ids=["distilbert", "whisper"],
)
@pytest.mark.parametrize("act", [False, True])
@pytest.mark.parametrize("path", ONNX_PATHS)
def test_broadcast_residual_fuses(path, x_shape, r_shape, act):
    module, args = PositionResidual(r_shape, act=act).eval(), (torch.randn(x_shape),)
    model = export_onnx(module, args, path)

    optimized, report = optimize_checked(model)

    assert op_types(optimized) == ["NormAct"]
    residual = next(n for n in optimized.graph.node if n.op_type == "NormAct").input[3]
    assert [list(i.dims) for i in optimized.graph.initializer if i.name == residual] == [list(r_shape)]
    assert not near_misses(report, "fuse_add_norm")
    _assert_matches_float64(run_onnx(optimized, feeds_for(model, args))[0], module, args)


def test_broadcast_residual_through_torch_export():
    module, args = PositionResidual((32, 64), act=True).eval(), (torch.randn(2, 32, 64),)
    optimized, _ = optimize_checked(export_torch(module, args, "exported"))
    assert call_targets(optimized) == ["graphopt.add_norm_act.default", "<built-in function getitem>"]
    with torch.no_grad():
        _assert_matches_float64(optimized.module()(*args).numpy(), module, args)


def _hand_built(nodes, x_shape, constants, extra_inputs=()):
    """x → nodes → y, float32, with ``constants`` as initializers (name → array)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in extra_inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape)],
        [numpy_helper.from_array(a.astype(np.float32), name) for name, a in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _norm_mul_add_tanh(x_shape, scale, bias, norm_inputs=("x", "ones")):
    nodes = [
        helper.make_node("LayerNormalization", list(norm_inputs), ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Mul", ["h", "s"], ["m"]),
        helper.make_node("Add", ["m", "c"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
    ]
    rng = np.random.default_rng(0)
    constants = {
        "ones": np.ones(x_shape[-1]),
        "s": rng.standard_normal(scale),
        "c": rng.standard_normal(bias),
    }
    return _hand_built(nodes, x_shape, constants)


def test_hand_built_per_slice_chain_fuses():
    optimized, _ = optimize_checked(_norm_mul_add_tanh([4, 3, 8], (4, 1, 8), (4, 1, 8)))
    assert op_types(optimized) == ["NormAct"]


@pytest.mark.parametrize(
    ("x", "scale", "why"),
    [
        ([4, 3, 8], (4, 3, 1), "does not end in the normalized dims"),  # one value per row
        ([4, 3, 5, 8], (4, 1, 5, 8), "more than one block"),
    ],
)
def test_scale_the_kernel_cannot_read_stays(x, scale, why):
    optimized, report = optimize_checked(_norm_mul_add_tanh(x, scale, (x[-1],)))
    assert "NormAct" not in op_types(optimized)
    assert any(why in r for r in near_misses(report, "fuse_norm_scale_bias_act"))


def test_norm_with_its_own_scale_before_a_mul_stays():
    model = _norm_mul_add_tanh([4, 3, 8], (4, 1, 8), (4, 1, 8), norm_inputs=("x", "s8"))
    model.graph.initializer.append(numpy_helper.from_array(np.full(8, 2.0, np.float32), "s8"))
    optimized, report = optimize_checked(model)
    assert "NormAct" not in op_types(optimized)
    assert any("weights of its own" in r for r in near_misses(report, "fuse_norm_scale_bias_act"))


def _norm_times(scale_input: str, s_shape) -> tuple:
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ones"], ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Mul", ["h", scale_input], ["m"]),
        helper.make_node("Tanh", ["m"], ["y"]),
    ]
    return _hand_built(nodes, [4, 3, 8], {"ones": np.ones(8)}, extra_inputs=[("s", s_shape)])


def test_a_per_slice_scale_given_at_run_time_fuses():
    optimized, _ = optimize_checked(_norm_times("s", [4, 1, 8]))
    assert op_types(optimized) == ["NormAct"]
    rng = np.random.default_rng(0)
    x, scale = rng.standard_normal((4, 3, 8)), rng.standard_normal((4, 1, 8))
    (got,) = run_onnx(optimized, {"x": x.astype(np.float32), "s": scale.astype(np.float32)})
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(got, np.tanh((x - mean) / np.sqrt(var + 1e-5) * scale), rtol=1e-5, atol=1e-5)


def test_a_computed_scale_with_a_row_per_row_stays():
    optimized, report = graphopt.optimize(_norm_times("s", [4, 3, 8]))
    assert "NormAct" not in op_types(optimized)
    assert any("not per slice" in r for r in near_misses(report, "fuse_norm_scale_act"))


def test_a_scale_computed_from_the_norm_stays():
    """``norm(x) * g(norm(x))``: the fused op would read what it writes."""
    model = _norm_times("g", [4, 1, 8])
    model.graph.node.insert(1, helper.make_node("ReduceMean", ["h"], ["g"], keepdims=1, axes=[1]))
    model.opset_import[0].version = 17
    optimized, report = graphopt.optimize(model)
    assert "NormAct" not in op_types(optimized)
    assert any("'h' is also read by" in r for r in near_misses(report, "fuse_norm_scale_act"))


def test_rms_norm_then_bias_stays():
    nodes = [
        helper.make_node("RMSNormalization", ["x", "ones"], ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Add", ["h", "c"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
    ]
    constants = {"ones": np.ones(8), "c": np.ones((4, 1, 8))}
    graph = _hand_built(nodes, [4, 3, 8], constants)
    graph.opset_import[0].version = 23
    _, report = graphopt.optimize(graph)
    assert any("RMS norm" in r for r in near_misses(report, "fuse_norm_bias_act"))


def test_residual_over_two_blocks_of_dims_stays():
    # (no activation: with one, the norm fuses alone and the add's near miss is moot)
    nodes = [
        helper.make_node("Add", ["x", "r"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "ones"], ["y"], axis=-1, epsilon=1e-5),
    ]
    constants = {"ones": np.ones(8), "r": np.ones((2, 1, 4, 8))}
    optimized, report = optimize_checked(_hand_built(nodes, [2, 3, 4, 8], constants))
    assert "more than one block" in " ".join(near_misses(report, "fuse_add_norm"))
    assert op_types(optimized) == ["Add", "LayerNormalization"]


def test_a_bias_added_before_the_norm_is_no_residual():
    # MatMul → Add(bias [D]) → norm: the add is a linear layer's bias, which the runtime fuses with
    # its matmul; taking it as a one-row residual would leave the matmul alone.
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "ones"], ["y"], axis=-1, epsilon=1e-5),
    ]
    rng = np.random.default_rng(1)
    constants = {"w": rng.standard_normal((8, 8)), "b": rng.standard_normal(8), "ones": np.ones(8)}
    optimized, report = optimize_checked(_hand_built(nodes, [3, 8], constants))
    assert op_types(optimized) == ["MatMul", "Add", "LayerNormalization"]
    assert any("a bias" in r for r in near_misses(report, "fuse_add_norm"))


class AdaptiveNorm(torch.nn.Module):
    """DiT's adaptive layer norm: a weightless LayerNorm modulated by a scale and shift computed from a
    per-sample embedding (``chunk`` of one linear layer), then a linear layer wider than
    fuse_norm_act_linear takes (which would take the norm into its own kernel)."""

    def __init__(self, d=16, e=8):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.emb, self.proj = torch.nn.Linear(e, 2 * d), torch.nn.Linear(d, 4 * d)

    def forward(self, x, t):
        shift, scale = self.emb(torch.nn.functional.silu(t)).chunk(2, dim=1)
        return self.proj(self.norm(x) * (1 + scale[:, None]) + shift[:, None])


ADAPTIVE_ARGS = (torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1)), torch.randn(2, 8))


@pytest.mark.parametrize("path", ONNX_PATHS)
def test_adaptive_layer_norm_becomes_one_norm_act(path):
    torch.manual_seed(0)
    module = AdaptiveNorm().eval()
    model = export_onnx(module, ADAPTIVE_ARGS, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("fuse_norm_modulation") == 1
    ops = op_types(optimized)
    assert ops.count("NormAct") == 1 and "LayerNormalization" not in ops
    (node,) = [n for n in optimized.graph.node if n.op_type == "NormAct"]
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["activation"] == b"identity"
    (got,) = run_onnx(optimized, feeds_for(model, ADAPTIVE_ARGS))
    _assert_matches_float64(got, module, ADAPTIVE_ARGS)


def test_adaptive_layer_norm_through_torch_export():
    torch.manual_seed(0)
    module = AdaptiveNorm().eval()
    optimized, report = optimize_checked(export_torch(module, ADAPTIVE_ARGS, "export"))
    assert report.rule_counts.get("fuse_norm_modulation") == 1
    targets = call_targets(optimized)
    assert "graphopt.norm_act.default" in targets and not any("layer_norm" in t for t in targets)
    _assert_matches_float64(optimized.module()(*ADAPTIVE_ARGS).detach().numpy(), module, ADAPTIVE_ARGS)


class AdaptiveBlock(torch.nn.Module):
    """DiT's block: the modulated norm reads the residual stream (a sum read again after it), so the
    residual fusion takes the norm first and the modulation joins that NormAct."""

    def __init__(self, d=48, e=8):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.emb, self.mix = torch.nn.Linear(e, 2 * d), torch.nn.Linear(d, d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x, t):
        shift, scale = self.emb(torch.nn.functional.silu(t)).chunk(2, dim=1)
        h = x + self.mix(x)
        return h + self.proj(self.norm(h) * (1 + scale[:, None]) + shift[:, None])


BLOCK_ARGS = (torch.randn(2, 5, 48, generator=torch.Generator().manual_seed(2)), torch.randn(2, 8))


@pytest.mark.parametrize("form", [*ONNX_PATHS, "torch_export"])
def test_a_modulation_after_a_residual_norm_joins_its_norm_act(form):
    torch.manual_seed(0)
    module = AdaptiveBlock().eval()
    if form == "torch_export":
        optimized, report = optimize_checked(export_torch(module, BLOCK_ARGS, "export"))
        assert not any("layer_norm" in t for t in call_targets(optimized))
        got = optimized.module()(*BLOCK_ARGS).detach().numpy()
    else:
        model = export_onnx(module, BLOCK_ARGS, form)
        optimized, report = optimize_checked(model)
        assert op_types(optimized).count("NormAct") == 1 and "LayerNormalization" not in op_types(optimized)
        (got,) = run_onnx(optimized, feeds_for(model, BLOCK_ARGS))
    assert report.rule_counts.get("fuse_add_norm") == 1
    assert report.rule_counts.get("fuse_norm_modulation[after_residual]") == 1
    _assert_matches_float64(got, module, BLOCK_ARGS)


@pytest.mark.parametrize(("form", "dtype"), [("torch_export", torch.bfloat16), ("dynamo", torch.float16)])
def test_a_16_bit_modulation_after_a_residual_fuses_and_passes_the_check(form, dtype):
    torch.manual_seed(0)
    module = AdaptiveBlock().eval().to(dtype)
    args = tuple(a.to(dtype) for a in BLOCK_ARGS)
    if form == "torch_export":
        exported = export_torch(module, args, "export")
    else:
        exported = export_onnx(module, args, form)
    _, report = optimize_checked(exported)
    assert report.rule_counts.get("fuse_norm_modulation[after_residual]") == 1
    assert report.verification["ok"], report.verification["summary"]
