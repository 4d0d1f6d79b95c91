"""The random programs' draws beyond the numeric check's own (models/random_draws.py): what they hold,
and that the check on them refuses what it is there to refuse."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from graphopt.ir import DType
from graphopt.verification.draws import random_inputs
from models.random_checks import check_adversarial
from models.random_draws import adversarial_draws

SPECS = {
    "x32": (DType.FLOAT32, (6, 5)),
    "x16": (DType.FLOAT16, (2, 3, 4)),
    "xbf": (DType.BFLOAT16, (4,)),
    "index": (DType.INT64, (3,)),
}


def test_the_non_finite_draw():
    [draw] = adversarial_draws(SPECS, seed=5)
    assert draw.name == "non-finite" and not draw.stress and not draw.ill_conditioned
    normal = random_inputs(SPECS, 5)
    for name, (dtype, shape) in SPECS.items():
        got = draw.feeds[name]
        assert got.dtype == dtype.numpy and got.shape == shape
        if not dtype.is_float:
            np.testing.assert_array_equal(got, normal[name])
            continue
        rows = got.astype(np.float64).reshape(-1, shape[-1])
        specials = ~np.isfinite(rows)
        assert specials.sum(axis=1).tolist() == [1 if r % 3 == 0 else 0 for r in range(rows.shape[0])]
        kinds = [(bool(np.isnan(v)), bool(v > 0)) for v in rows[specials]]
        assert kinds == [[(True, False), (False, True), (False, False)][i % 3] for i in range(len(kinds))]
        clean = normal[name].astype(np.float64).reshape(rows.shape)
        np.testing.assert_array_equal(rows[~specials], clean[~specials])


def test_no_draws_without_float_inputs():
    assert adversarial_draws({"index": (DType.INT64, (3,))}) == []


def _model(*nodes) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])],
        [
            onnx.numpy_helper.from_array(np.float32(0.0), "zero"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_model_that_drops_nan_is_refused_on_the_non_finite_draw():
    original = _model(helper.make_node("Relu", ["x"], ["y"]))
    drops_nan = _model(
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("IsNaN", ["x"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "r"], ["y"]),
    )
    check_adversarial(original, original)
    with pytest.raises(AssertionError, match=r"^y: NaN/inf positions differ"):
        check_adversarial(original, drops_nan)
