"""The library's CPU AffineAct kernel against the float64 reference, and its errors on bad nodes."""

import math

import numpy as np
import pytest
from ort_models import assert_close, fused_model, run_model, storage_round

from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.spec import Activation

pytestmark = pytest.mark.usefixtures("library")

# (shape, axis): a linear layer's bias, a batch norm over NCHW, the channel in the middle from the end.
LAYOUTS = {
    "bias": ((3, 5, 24), -1),
    "nchw": ((2, 6, 4, 5), 1),
    "middle": ((2, 5, 3, 4), -3),
    "1x1": ((4, 3, 1, 1), 1),
}


def inputs(shape, axis, dtype, present=("Scale", "Bias"), std=2.0, seed=0):
    rng = np.random.default_rng(seed)
    channels = shape[axis]
    arrays = {
        "X": storage_round((rng.standard_normal(shape) * std).astype(np.float32), dtype),
        "Scale": storage_round((rng.standard_normal(channels) + 1).astype(np.float32), dtype),
        "Bias": storage_round(rng.standard_normal(channels).astype(np.float32), dtype),
    }
    return {name: (a if name == "X" or name in present else None) for name, a in arrays.items()}


def check(arrays, attributes, dtype, threads=1):
    (y,) = run_model(fused_model("AffineAct", arrays, attributes, dtype), arrays, threads)
    want = AFFINE_ACT.reference(arrays["X"], arrays["Scale"], arrays["Bias"], **attributes)
    assert y.shape == arrays["X"].shape
    assert_close(y, want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("activation", [a.attr for a in Activation])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_matches_reference(layout, activation, dtype):
    shape, axis = LAYOUTS[layout]
    check(inputs(shape, axis, dtype), {"activation": activation, "axis": axis}, dtype)


@pytest.mark.parametrize("present", [(), ("Scale",), ("Bias",)])
def test_optional_inputs(present):
    shape, axis = LAYOUTS["nchw"]
    check(inputs(shape, axis, "float32", present), {"activation": "silu", "axis": axis}, "float32")


@pytest.mark.parametrize(
    ("shape", "axis", "dtype"),
    [((64, 8, 33), 1, "float32"), ((300, 40), -1, "float16"), ((5, 70, 7, 9), 1, "bfloat16")],
)
def test_many_rows_over_threads(shape, axis, dtype):
    """Rows in blocks (of 4096 values) whose ends fall inside a channel's rows, over two threads."""
    check(inputs(shape, axis, dtype), {"activation": "gelu", "axis": axis}, dtype, threads=2)


def test_non_finite_inputs_give_what_the_reference_gives():
    values = np.array([math.inf, -math.inf, math.nan, 3.0e38, -3.0e38, 0.0, -1e6, 1e6], np.float32)
    arrays = {"X": np.tile(values, (2, 1)), "Scale": np.ones(8, np.float32), "Bias": np.zeros(8, np.float32)}
    for activation in ("relu", "silu", "sigmoid", "tanh", "gelu", "gelu_tanh"):
        (y,) = run_model(
            fused_model("AffineAct", arrays, {"activation": activation, "axis": -1}, "float32"), arrays
        )
        want = AFFINE_ACT.reference(arrays["X"], None, None, activation=activation, axis=-1).astype(
            np.float32
        )
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want), err_msg=activation)
        finite = np.isfinite(want)
        np.testing.assert_allclose(y[finite], want[finite], rtol=1e-6, atol=1e-30, err_msg=activation)


def test_a_scale_of_the_wrong_length_is_refused():
    arrays = inputs((2, 6, 4), 1, "float32")
    arrays["Scale"] = np.ones(4, np.float32)
    with pytest.raises(Exception, match=r"AffineAct node 'affineact_0'.*Scale"):
        run_model(fused_model("AffineAct", arrays, {"activation": "relu", "axis": 1}, "float32"), arrays)


def test_an_axis_out_of_range_is_refused():
    arrays = inputs((2, 6), 1, "float32", present=())
    with pytest.raises(Exception, match="attribute 'axis' is 2, out of range"):
        run_model(fused_model("AffineAct", arrays, {"activation": "relu", "axis": 2}, "float32"), arrays)


def test_an_unknown_activation_is_refused():
    arrays = inputs((2, 6), 1, "float32", present=())
    with pytest.raises(Exception, match="activation"):
        run_model(fused_model("AffineAct", arrays, {"activation": "swish", "axis": 1}, "float32"), arrays)
