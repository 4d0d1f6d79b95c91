"""The library's float activations against float64, densely: Y = activation(Bias) when Scale is 0."""

import numpy as np
import pytest
from ort_models import fused_model, run_model

from graphopt.fused.spec import Activation, activation_reference

pytestmark = pytest.mark.usefixtures("library")

GRID = np.concatenate(
    [
        np.linspace(-12, 12, 48001),
        np.linspace(-0.01, 0.01, 2001),
        [1e-30, -1e-30, 1e-8, -1e-8, 50, -50, 88.5, -88.5, 100, -100],
    ]
).astype(np.float32)


def activate(activation: Activation, values: np.ndarray) -> np.ndarray:
    d = values.size
    inputs = {
        "X": np.random.default_rng(0).standard_normal((1, d)).astype(np.float32),
        "Scale": np.zeros(d, np.float32),
        "Bias": values,
    }
    return run_model(fused_model("NormAct", inputs, {"activation": activation.attr}, "float32"), inputs)[0][0]


@pytest.mark.parametrize("activation", list(Activation), ids=lambda a: a.attr)
def test_accuracy(activation):
    actual = activate(activation, GRID).astype(np.float64)
    expected = activation_reference(activation, GRID.astype(np.float64))
    error = np.abs(actual - expected)
    # Within about 2 float32 ulps of max(1, |expected|) everywhere ...
    assert (error / np.maximum(1.0, np.abs(expected))).max() < 3e-7
    # ... and relatively where the usual formulas keep relative accuracy (GELU's 1 + erf(x)
    # cancels for negative x in every implementation, ORT's and torch's included).
    if activation in (Activation.TANH, Activation.SILU, Activation.SIGMOID):
        significant = np.abs(expected) > 1e-3
        assert (error[significant] / np.abs(expected[significant])).max() < 3e-7


@pytest.mark.parametrize("activation", list(Activation), ids=lambda a: a.attr)
def test_nan_propagates(activation):
    assert np.isnan(activate(activation, np.array([np.nan, 1.0], np.float32))[0])
