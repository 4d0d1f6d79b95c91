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


def test_the_body_normalizes_with_one_instance_norm():
    """ONNX Runtime runs InstanceNormalization as one kernel; the statistics spelled out in ReduceMean,
    Sub, Mul, Sqrt and Div took 1.3x as long on its CPU EP."""
    variant = Variant.of(GROUP_NORM_ACT, present={"Scale", "Bias"}, groups=4, activation="silu")
    nodes, _ = decompose(variant)
    ops = [n.op_type for n in nodes]
    assert ops.count("InstanceNormalization") == 1
    assert not {"ReduceMean", "Sqrt", "Div"} & set(ops), ops


@pytest.mark.parametrize("opset", (13, newest_ort_opset()))
@pytest.mark.parametrize(
    "case", ["offset", "near_max", "constant_groups", "non_finite"],
)  # fmt: skip
def test_fallback_on_adversarial_inputs(case, opset):
    """fp32 X of a large common offset (to float32's precision: its rounding alone took InstanceNormalization
    of the raw values 1e-3 off), values near float16's maximum, groups of one value (variance 0: the
    output is the shift alone), and NaN and infinity, which stay in their own groups."""
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
    x, scale, bias = (feeds[n].astype(np.float64) for n in ("X", "Scale", "Bias"))
    expected, _ = GROUP_NORM_ACT.reference(x, scale, bias, groups=groups, activation="silu", epsilon=1e-5)
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(y), np.isnan(expected)), case
    assert_close(y[finite], expected[finite], "float32")
