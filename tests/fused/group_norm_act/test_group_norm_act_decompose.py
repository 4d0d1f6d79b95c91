"""GroupNormAct's fallback function (its ONNX decomposition) run by a plain ONNX Runtime, against
the float64 reference: each combination of optional ports, activations, ranks and opsets."""

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fused_checks import ACTIVATIONS, assert_close, newest_ort_opset, session

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.fused.onnx_decompose import Variant, decompose
from graphopt.fused.onnx_functions import attach_functions, overload_name
from graphopt.fused.spec import DOMAIN, DOMAIN_VERSION

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
PORTS = ("X", "Scale", "Bias", "Residual")


def model_of(nodes, inputs, outputs, dtype, opset):
    """``inputs`` map names to shapes; every output has X's."""
    elem = ELEM[dtype]
    graph = helper.make_graph(
        nodes,
        "group_norm_act",
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, elem, inputs["X"]) for name in outputs],
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def run_fallback(model, feeds):
    attach_functions(model)
    onnx.checker.check_model(model, full_check=True)
    return session(model).run(None, feeds)


@pytest.mark.parametrize("opset", (13, 18, newest_ort_opset()))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    ("present", "shape"),
    [
        ((), (2, 6, 5)),
        (("Scale", "Bias"), (2, 6, 3, 4)),
        (("Bias", "Residual"), (3, 6)),
        (("Scale",), (1, 6, 2, 2, 2)),
    ],
)
def test_fallback_matches_reference(present, shape, dtype, opset):
    """One node per activation in one model: each gets its own overload."""
    rng = np.random.default_rng(len(shape) + opset)
    shapes = {"X": shape, "Scale": (6,), "Bias": (6,), "Residual": shape}
    feeds = {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items() if n == "X" or n in present}
    inputs = [n if n in feeds else "" for n in PORTS]
    while not inputs[-1]:
        inputs.pop()
    nodes, outputs = [], []
    for act in ACTIVATIONS:
        node_outputs = [f"y_{act}"] + ([f"sum_{act}"] if "Residual" in present else [])
        nodes.append(
            helper.make_node(
                "GroupNormAct", inputs, node_outputs, domain=DOMAIN, groups=3, activation=act, epsilon=1e-3
            )
        )
        outputs += node_outputs
    results = run_fallback(model_of(nodes, {n: shapes[n] for n in feeds}, outputs, dtype, opset), feeds)
    s = feeds["X"].astype(np.float32)
    if "Residual" in present:
        s = (s + feeds["Residual"].astype(np.float32)).astype(dtype)
    for act, y in zip(ACTIVATIONS, results[:: 2 if "Residual" in present else 1], strict=True):
        expected, _ = GROUP_NORM_ACT.reference(
            s, feeds.get("Scale"), feeds.get("Bias"), groups=3, activation=act, epsilon=1e-3
        )
        assert_close(y, expected, dtype)
    if "Residual" in present:
        assert_close(results[1], s, dtype)


def test_overload_names_the_groups_and_ports():
    variant = Variant.of(
        GROUP_NORM_ACT, present={"Scale", "Residual"}, groups=32, activation="silu", epsilon=1e-6
    )
    assert overload_name(variant) == "groups32_silu_eps1e-06_scale_residual"


def test_the_body_is_the_exporters_spelling_in_x_type():
    """One InstanceNormalization between Reshapes, then the per-channel Mul and Add, in X's element type
    (no Cast to float32): the ops the original ran, so that a runtime without graphopt's library runs
    them at the original's cost. The statistics spelled out in ReduceMean took 1.3x as long on ONNX
    Runtime's CPU EP, and casts to float32 1.3x on its CUDA EP in fp16."""
    variant = Variant.of(GROUP_NORM_ACT, present={"Scale", "Bias"}, groups=4, activation="silu")
    nodes, _ = decompose(variant)
    ops = [n.op_type for n in nodes]
    assert ops.count("InstanceNormalization") == 1
    assert not {"ReduceMean", "Sqrt", "Div", "Cast"} & set(ops), ops


def exporter_spelling(groups: int) -> list:
    """GroupNorm + SiLU as torch.onnx.export writes it (Reshape, InstanceNormalization, Reshape, Mul, Add)."""
    c = helper.make_tensor
    return [
        helper.make_node("Constant", [], ["split"], value=c("s", TensorProto.INT64, [3], [0, groups, -1])),
        helper.make_node("Constant", [], ["ones"], value=c("o", TensorProto.FLOAT, [groups], [1.0] * groups)),
        helper.make_node(
            "Constant", [], ["zeros"], value=c("z", TensorProto.FLOAT, [groups], [0.0] * groups)
        ),
        helper.make_node("Constant", [], ["per_channel"], value=c("p", TensorProto.INT64, [3], [-1, 1, 1])),
        helper.make_node("Reshape", ["X", "split"], ["grouped"]),
        helper.make_node("InstanceNormalization", ["grouped", "ones", "zeros"], ["normed"], epsilon=1e-5),
        helper.make_node("Shape", ["X"], ["shape"]),
        helper.make_node("Reshape", ["normed", "shape"], ["n"]),
        helper.make_node("Reshape", ["Scale", "per_channel"], ["scale_c"]),
        helper.make_node("Reshape", ["Bias", "per_channel"], ["bias_c"]),
        helper.make_node("Mul", ["n", "scale_c"], ["scaled"]),
        helper.make_node("Add", ["scaled", "bias_c"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["gate"]),
        helper.make_node("Mul", ["z", "gate"], ["Y"]),
    ]


@pytest.mark.parametrize("opset", (13, newest_ort_opset()))
@pytest.mark.parametrize(
    "case", ["offset", "near_max", "constant_groups", "non_finite"],
)  # fmt: skip
def test_fallback_on_adversarial_inputs(case, opset):
    """fp32 X of a large common offset, values near float16's maximum, groups of one value (variance 0: the
    output is the shift alone), and NaN and infinity, which stay in their own groups: the fallback computes
    what the exporter's spelling computes, and that within float32's tolerance of the float64 reference
    but at the offset, where InstanceNormalization's float32 statistics are 1e-3 off (the fused kernels
    are not: they normalize differences from a pivot)."""
    rng = np.random.default_rng(7)
    shape, groups = (2, 8, 5, 3), 4
    x = rng.standard_normal(shape)
    if case == "offset":
        x = x + 1e4
    elif case == "near_max":
        x = x * 3e4
    elif case == "constant_groups":
        x[:, :2] = 3.0
    else:
        x[0, 0, 0, 0], x[1, 7, 4, 2] = np.nan, np.inf
    feeds = {"X": x.astype(np.float32), "Scale": rng.standard_normal(8).astype(np.float32),
             "Bias": rng.standard_normal(8).astype(np.float32)}  # fmt: skip
    node = helper.make_node(
        "GroupNormAct", ["X", "Scale", "Bias"], ["Y"], domain=DOMAIN, groups=groups, activation="silu",
        epsilon=1e-5,
    )  # fmt: skip
    inputs = {n: a.shape for n, a in feeds.items()}
    (y,) = run_fallback(model_of([node], inputs, ["Y"], "float32", opset), feeds)
    (exported,) = session(model_of(exporter_spelling(groups), inputs, ["Y"], "float32", opset)).run(
        None, feeds
    )
    np.testing.assert_array_equal(y, exported)
    x, scale, bias = (feeds[n].astype(np.float64) for n in ("X", "Scale", "Bias"))
    expected, _ = GROUP_NORM_ACT.reference(x, scale, bias, groups=groups, activation="silu", epsilon=1e-5)
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(y), np.isnan(expected)), case
    if case != "offset":
        assert_close(y[finite], expected[finite], "float32")
