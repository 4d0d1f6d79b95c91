"""NaN and infinities for the fused ops' ONNX implementations: the C++ kernels run by ONNX Runtime
(tests/ort) and the fallback functions (tests/fused). Each case is one node of a fused op with its
inputs, in port order, and the float64 reference of its outputs; rows hold NaN, +inf or -inf, and
scale and bias columns are infinite or NaN, so that every activation meets +inf, -inf and NaN.
(The Triton kernels meet the same values in tests/kernels/test_non_finite_rows.py.)"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from graphopt.fused import DOMAIN, DOMAIN_VERSION, NORM_ACT, NORM_ACT_LINEAR
from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT

NAN, INF = math.nan, math.inf
TOLERANCES = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}


@dataclass
class Case:
    op: str
    inputs: dict[str, np.ndarray | None]  # the op's ports in order (None: absent)
    attributes: dict
    outputs: tuple[str, ...]
    reference: list[np.ndarray]  # float64, one per output


def stored(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype``, as float32 for bfloat16 (which models take as float32)."""
    if dtype == "bfloat16":
        return values.astype(ml_dtypes.bfloat16).astype(np.float32)
    return values.astype(dtype)


def poisoned_rows(rng, rows: int, cols: int, dtype: str) -> np.ndarray:
    """Random rows; row 0 holds a NaN, row 1 +inf, row 2 -inf, row 3 both infinities."""
    x = rng.standard_normal((rows, cols))
    x[0, 3], x[1, 5], x[2, 0], x[3, 1], x[3, 2] = NAN, INF, -INF, INF, -INF
    return stored(x, dtype)


def special_columns(rng, cols: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(scale, bias): scale +inf in column 9 and NaN in 10, bias -inf in 11, +inf in 13, NaN in 15."""
    scale, bias = 1.0 + 0.5 * rng.standard_normal(cols), 0.5 * rng.standard_normal(cols)
    scale[9], scale[10] = INF, NAN
    bias[11], bias[13], bias[15] = -INF, INF, NAN
    return stored(scale, dtype), stored(bias, dtype)


def norm_act(norm: str, activation: str, dtype: str, residual: bool = False) -> Case:
    rng = np.random.default_rng([1, len(norm), len(activation), residual])
    scale, bias = special_columns(rng, 48, dtype)
    if residual:
        x, r = stored(rng.standard_normal((7, 48)), dtype), poisoned_rows(rng, 7, 48, dtype)
    else:
        x, r = poisoned_rows(rng, 7, 48, dtype), None
    attributes = {"norm": norm, "activation": activation, "epsilon": 1e-5, "axis": -1}
    y, total = NORM_ACT.reference(x, scale, bias, r, norm=norm, activation=activation, epsilon=1e-5, axis=-1)
    if not residual:
        return Case("NormAct", {"X": x, "Scale": scale, "Bias": bias}, attributes, ("Y",), [y])
    # (the norm sees the sum as stored)
    y, _ = NORM_ACT.reference(
        stored(total, dtype), scale, bias, norm=norm, activation=activation, epsilon=1e-5, axis=-1
    )
    inputs = {"X": x, "Scale": scale, "Bias": bias, "Residual": r}
    return Case("NormAct", inputs, attributes, ("Y", "ResidualSum"), [y, total])


def norm_act_linear(activation: str, dtype: str) -> Case:
    """NaN and infinite rows, and a norm bias of -inf in column 11: act(-inf) is a term of each dot
    product of the clean rows."""
    rng = np.random.default_rng([2, len(activation)])
    x = poisoned_rows(rng, 6, 48, dtype)
    bias = 0.5 * rng.standard_normal(48)
    bias[11] = -INF
    bias = stored(bias, dtype)
    weight = stored(rng.standard_normal((3, 48)) / math.sqrt(48), dtype)
    linear_bias = stored(rng.standard_normal(3), dtype)
    attributes = {"norm": "layer", "activation": activation, "epsilon": 1e-5, "out_activation": "identity"}
    y = NORM_ACT_LINEAR.reference(x, None, bias, weight, linear_bias, **attributes)
    inputs = {"X": x, "Scale": None, "Bias": bias, "Weight": weight, "LinearBias": linear_bias}
    return Case("NormActLinear", inputs, attributes, ("Y",), [y])


def group_norm_act(activation: str, dtype: str) -> Case:
    """A NaN in group 0 of sample 0, +inf in group 1, -inf in group 2 of sample 1; channel 5's scale
    infinite, channel 6's bias -inf and channel 7's +inf."""
    rng = np.random.default_rng([3, len(activation)])
    x = rng.standard_normal((2, 8, 3, 5))
    x[0, 0, 1, 2], x[0, 3, 0, 0], x[1, 4, 2, 4] = NAN, INF, -INF
    scale, bias = 1.0 + 0.5 * rng.standard_normal(8), 0.5 * rng.standard_normal(8)
    scale[5], bias[6], bias[7] = INF, -INF, INF
    x, scale, bias = stored(x, dtype), stored(scale, dtype), stored(bias, dtype)
    attributes = {"groups": 4, "activation": activation, "epsilon": 1e-5}
    y, _ = GROUP_NORM_ACT.reference(x, scale, bias, **attributes)
    return Case("GroupNormAct", {"X": x, "Scale": scale, "Bias": bias}, attributes, ("Y",), [y])


def affine_act(activation: str, dtype: str) -> Case:
    """Every special value and the type's extremes through X * Scale + Bias, and an infinite scale."""
    top = float(ml_dtypes.finfo(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)).max)
    values = [NAN, INF, -INF, top, -top, -1e30 if dtype != "float16" else -top / 2, 0.0, -0.0, 7.5, -7.5]
    x = stored(np.tile(np.asarray(values), (3, 1)), dtype)
    scale, bias = np.ones(len(values)), np.zeros(len(values))
    scale[6], bias[8] = INF, -INF  # (inf * 0 is NaN; 7.5 - inf is -inf)
    scale, bias = stored(scale, dtype), stored(bias, dtype)
    attributes = {"activation": activation, "axis": -1}
    y = AFFINE_ACT.reference(x, scale, bias, **attributes)
    return Case("AffineAct", {"X": x, "Scale": scale, "Bias": bias}, attributes, ("Y",), [y])


def assert_same_specials(got: np.ndarray, want: np.ndarray, dtype: str, what: str) -> None:
    """NaN and infinities exactly where the reference, stored in ``dtype``, has them; the rest
    within the dtype's tolerance (relative and absolute)."""
    got = np.asarray(got, dtype=np.float64)
    with np.errstate(over="ignore"):
        want = stored(np.asarray(want, dtype=np.float64), dtype).astype(np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        wrong = np.flatnonzero(test(got) != test(want))
        assert not wrong.size, (
            f"{what}: {name} differs at {wrong[:8]}: got {got.flat[wrong[:8]]}, want {want.flat[wrong[:8]]}"
        )
    finite = np.isfinite(want)
    tol = TOLERANCES[dtype]
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol, err_msg=what)


def node_model(case: Case, dtype: str, opset: int) -> onnx.ModelProto:
    """One node of ``case``'s op taking and giving ``dtype`` (float32 or float16)."""
    elem = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dtype]
    inputs = [name for name, value in case.inputs.items() if value is not None]
    node = helper.make_node(
        case.op, [name if case.inputs[name] is not None else "" for name in case.inputs], list(case.outputs),
        domain=DOMAIN, **case.attributes,
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "non_finite",
        [helper.make_tensor_value_info(name, elem, list(case.inputs[name].shape)) for name in inputs],
        [helper.make_tensor_value_info(name, elem, None) for name in case.outputs],
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)
