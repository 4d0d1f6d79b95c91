import numpy as np
import onnx
import pytest
from fused_checks import ACTIVATIONS, NORMS, assert_close, newest_ort_opset, session
from onnx import TensorProto, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION, NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.onnx_decompose import Variant
from graphopt.fused.onnx_functions import attach_functions, overload_name

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
OPSETS = (17, 18, newest_ort_opset())
SHAPE = (2, 3, 16)


def make_model(nodes, inputs, outputs, dtype, opset, ir_version=10):
    """``inputs``/``outputs`` map names to shapes; element types are ``dtype``."""
    elem = ELEM[dtype]
    graph = helper.make_graph(
        nodes,
        "fused",
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in outputs.items()],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)],
        ir_version=ir_version,
    )


def random(rng, shapes, dtype):
    return {name: rng.standard_normal(shape).astype(dtype) for name, shape in shapes.items()}


def run_fallback(model, feeds):
    attach_functions(model)
    onnx.checker.check_model(model, full_check=True)
    outputs = session(model).run(None, feeds)
    return dict(zip([o.name for o in model.graph.output], outputs, strict=True))


# Optional ports in use, and the first normalized dimension, of each NormAct case.
NORM_ACT_CASES = {
    "plain": ((), -1),
    "scale": (("Scale",), -1),
    "scale_bias": (("Scale", "Bias"), -1),
    "scale_bias_residual_sum": (("Scale", "Bias", "Residual", "ResidualSum"), -1),
    "residual_without_sum": (("Scale", "Residual"), -1),
    "bias_residual_sum_axis1": (("Bias", "Residual", "ResidualSum"), 1),
    "scale_axis-2": (("Scale",), -2),
}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("case", list(NORM_ACT_CASES))
def test_norm_act_fallback_matches_reference(case, norm, dtype, opset):
    """One node per activation, all in one model: each needs its own overload."""
    present, axis = NORM_ACT_CASES[case]
    param_shape = SHAPE[axis:]
    shapes = {"X": SHAPE, "Scale": param_shape, "Bias": param_shape, "Residual": SHAPE}
    given = {name: shape for name, shape in shapes.items() if name == "X" or name in present}
    feeds = random(np.random.default_rng(), given, dtype)
    node_inputs = [name if name in given else "" for name in shapes]
    with_sum = "ResidualSum" in present
    nodes, outputs = [], {}
    for act in ACTIVATIONS:
        names = [f"Y_{act}"] + ([f"Sum_{act}"] if with_sum else [])
        attrs = {"norm": norm, "activation": act, "epsilon": 1e-5, "axis": axis}
        nodes.append(helper.make_node("NormAct", node_inputs, names, domain=DOMAIN, **attrs))
        outputs.update(dict.fromkeys(names, SHAPE))
    model = make_model(nodes, given, outputs, dtype, opset)

    got = run_fallback(model, feeds)

    assert len(model.functions) == len(ACTIVATIONS)
    for act in ACTIVATIONS:
        y, residual_sum = NORM_ACT.reference(
            feeds["X"], feeds.get("Scale"), feeds.get("Bias"), feeds.get("Residual"),
            norm=norm, activation=act, epsilon=1e-5, axis=axis,
        )  # fmt: skip
        assert got[f"Y_{act}"].dtype == np.dtype(dtype)
        assert_close(got[f"Y_{act}"], y, dtype)
        if with_sum:
            assert_close(got[f"Sum_{act}"], residual_sum, dtype)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("optional", [("Scale", "Bias", "LinearBias"), ()])
def test_norm_act_linear_fallback_matches_reference(optional, norm, dtype, opset):
    d, k = 32, 5
    shapes = {"X": (2, 3, d), "Scale": (d,), "Bias": (d,), "Weight": (k, d), "LinearBias": (k,)}
    given = {name: shape for name, shape in shapes.items() if name in ("X", "Weight") or name in optional}
    feeds = random(np.random.default_rng(), given, dtype)
    node_inputs = [name if name in feeds else "" for name in shapes]
    pairs = [(act, ACTIVATIONS[(i + 3) % len(ACTIVATIONS)]) for i, act in enumerate(ACTIVATIONS)]
    nodes = [
        helper.make_node(
            "NormActLinear",
            node_inputs,
            [f"Y_{act}_{out}"],
            domain=DOMAIN,
            norm=norm,
            activation=act,
            epsilon=1e-5,
            out_activation=out,
        )
        for act, out in pairs
    ]
    outputs = {f"Y_{act}_{out}": (2, 3, k) for act, out in pairs}
    model = make_model(nodes, {n: shapes[n] for n in feeds}, outputs, dtype, opset)

    got = run_fallback(model, feeds)

    for act, out in pairs:
        expected = NORM_ACT_LINEAR.reference(
            feeds["X"], feeds.get("Scale"), feeds.get("Bias"), feeds["Weight"], feeds.get("LinearBias"),
            norm=norm, activation=act, epsilon=1e-5, out_activation=out,
        )  # fmt: skip
        assert_close(got[f"Y_{act}_{out}"], expected, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_opset_13_names_the_element_type(dtype):
    """Without CastLike (before opset 15) the body casts back to a named type."""
    node = helper.make_node(
        "NormAct", ["X", "Scale"], ["Y"], domain=DOMAIN, norm="layer", activation="gelu", axis=1
    )
    model = make_model([node], {"X": SHAPE, "Scale": SHAPE[1:]}, {"Y": SHAPE}, dtype, 13)
    feeds = random(np.random.default_rng(), {"X": SHAPE, "Scale": SHAPE[1:]}, dtype)

    got = run_fallback(model, feeds)

    assert model.graph.node[0].overload == f"layer_gelu_eps1e-05_axis1_scale_{dtype}"
    expected, _ = NORM_ACT.reference(
        feeds["X"], feeds["Scale"], norm="layer", activation="gelu", epsilon=1e-5, axis=1
    )
    assert_close(got["Y"], expected, dtype)


def test_overload_names_read_like_the_attributes():
    norm_act = Variant.of(NORM_ACT, norm="layer", activation="gelu", epsilon=1e-5)
    assert overload_name(norm_act) == "layer_gelu_eps1e-05_axis-1"
    with_inputs = Variant.of(
        NORM_ACT, norm=Norm.RMS, activation=Activation.SILU, epsilon=1e-6, axis=2,
        present=frozenset({"Residual", "Scale"}),
    )  # fmt: skip
    assert overload_name(with_inputs) == "rms_silu_eps1e-06_axis2_scale_residual"
    with_sum = Variant.of(NORM_ACT, activation="relu", present=frozenset({"Residual", "ResidualSum"}))
    assert overload_name(with_sum) == "layer_relu_eps1e-05_axis-1_residual_residualsum"
    linear = Variant.of(
        NORM_ACT_LINEAR,
        activation="relu",
        out_activation=Activation.GELU_TANH,
        present=frozenset({"LinearBias"}),
    )
    assert overload_name(linear) == "layer_relu_eps1e-05_out-gelu_tanh_linearbias"


def test_attach_is_idempotent_and_shares_functions():
    nodes = [
        helper.make_node("NormAct", ["X"], ["A"], domain=DOMAIN, activation="relu"),
        helper.make_node("NormAct", ["A"], ["B"], domain=DOMAIN, activation="relu"),
        helper.make_node("NormAct", ["B"], ["Y"], domain=DOMAIN, activation="tanh"),
    ]
    model = make_model(nodes, {"X": SHAPE}, {"Y": SHAPE}, "float32", 18, ir_version=8)
    model.opset_import.pop()  # no graphopt import yet

    attach_functions(model)
    once = model.SerializeToString()
    attach_functions(model)

    assert model.SerializeToString() == once
    assert model.ir_version == 10
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18), (DOMAIN, DOMAIN_VERSION)]
    assert sorted(f.overload for f in model.functions) == [
        "layer_relu_eps1e-05_axis-1",
        "layer_tanh_eps1e-05_axis-1",
    ]
    assert [n.overload for n in model.graph.node] == [
        "layer_relu_eps1e-05_axis-1",
        "layer_relu_eps1e-05_axis-1",
        "layer_tanh_eps1e-05_axis-1",
    ]


def test_nodes_inside_subgraphs_get_functions():
    def branch(name, activation):
        node = helper.make_node("NormAct", ["X"], [f"{name}_out"], domain=DOMAIN, activation=activation)
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, SHAPE)
        return helper.make_graph([node], name, [], [out])

    if_node = helper.make_node(
        "If", ["cond"], ["Y"], then_branch=branch("then", "sigmoid"), else_branch=branch("else", "relu")
    )
    model = make_model([if_node], {"X": SHAPE}, {"Y": SHAPE}, "float32", 18)
    model.graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    x = np.random.default_rng().standard_normal(SHAPE).astype(np.float32)

    for cond, activation in ((True, "sigmoid"), (False, "relu")):
        got = run_fallback(model, {"X": x, "cond": np.array(cond)})
        expected, _ = NORM_ACT.reference(x, norm="layer", activation=activation, epsilon=1e-5, axis=-1)
        assert_close(got["Y"], expected, "float32")
    assert len(model.functions) == 2


def test_unknown_activation_is_rejected_by_name():
    node = helper.make_node("NormAct", ["X"], ["Y"], domain=DOMAIN, activation="swish")
    model = make_model([node], {"X": SHAPE}, {"Y": SHAPE}, "float32", 18)
    with pytest.raises(ValueError, match="unknown activation 'swish'; expected one of: identity"):
        attach_functions(model)


def test_residual_sum_without_residual_is_rejected():
    node = helper.make_node("NormAct", ["X"], ["Y", "Sum"], domain=DOMAIN)
    model = make_model([node], {"X": SHAPE}, {"Y": SHAPE, "Sum": SHAPE}, "float32", 18)
    with pytest.raises(ValueError, match="ResidualSum is asked for without a Residual input"):
        attach_functions(model)


def test_opset_below_13_is_rejected():
    node = helper.make_node("NormAct", ["X"], ["Y"], domain=DOMAIN)
    model = make_model([node], {"X": SHAPE}, {"Y": SHAPE}, "float32", 12)
    with pytest.raises(ValueError, match="opset 12 is not supported; expected 13 or newer"):
        attach_functions(model)
