import numpy as np
import pytest
from ort_models import assert_close, offset_rows, random_inputs

from graphopt.fused import NORM_ACT_LINEAR, Activation

DTYPES = ["float32", "float16", "bfloat16"]


def reference(inputs, norm="layer", activation="identity", epsilon=1e-5, out_activation="identity"):
    full = {name: inputs.get(name) for name in ("X", "Scale", "Bias", "Weight", "LinearBias")}
    return NORM_ACT_LINEAR.reference(
        *full.values(), norm=norm, activation=activation, epsilon=epsilon, out_activation=out_activation
    )


def shapes(x, k, present=("Scale", "Bias", "LinearBias")):
    d = x[-1]
    all_shapes = {"X": x, "Scale": (d,), "Bias": (d,), "Weight": (k, d), "LinearBias": (k,)}
    return {n: s if n in ("X", "Weight") or n in present else None for n, s in all_shapes.items()}


def trim(inputs):
    """Leaves trailing absent inputs off the node, as exporters do."""
    while list(inputs.values())[-1] is None:
        inputs.popitem()
    return inputs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("activation", [a.attr for a in Activation])
def test_every_norm_and_activation(run_fused, dtype, norm, activation):
    rng = np.random.default_rng(10)
    inputs = random_inputs(rng, shapes((7, 48), 5), dtype)
    attributes = {"norm": norm, "activation": activation, "out_activation": "tanh"}
    (y,) = run_fused("NormActLinear", inputs, attributes, dtype)
    assert y.shape == (7, 5)
    assert_close(y, reference(inputs, norm, activation, out_activation="tanh"), dtype)


@pytest.mark.parametrize("out_activation", [a.attr for a in Activation])
def test_every_out_activation(run_fused, out_activation):
    rng = np.random.default_rng(11)
    inputs = random_inputs(rng, shapes((9, 32), 6), "float32")
    (y,) = run_fused(
        "NormActLinear", inputs, {"activation": "relu", "out_activation": out_activation}, "float32"
    )
    assert_close(y, reference(inputs, activation="relu", out_activation=out_activation), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "present",
    [(), ("Scale",), ("Bias",), ("LinearBias",), ("Scale", "LinearBias")],
    ids=lambda p: "+".join(p) or "none",
)
def test_optional_inputs(run_fused, dtype, present):
    rng = np.random.default_rng(12)
    inputs = trim(random_inputs(rng, shapes((4, 20), 3, present), dtype))
    (y,) = run_fused("NormActLinear", inputs, {"norm": "rms", "activation": "silu"}, dtype)
    assert_close(y, reference(inputs, "rms", "silu"), dtype)


@pytest.mark.parametrize(("x", "k"), [((13,), 4), ((2, 3, 16), 1), ((2, 2, 3, 7), 9), ((5, 300), 64)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_shapes(run_fused, x, k, dtype):
    rng = np.random.default_rng(13)
    inputs = random_inputs(rng, shapes(x, k), dtype)
    (y,) = run_fused("NormActLinear", inputs, {"activation": "gelu"}, dtype)
    assert y.shape == (*x[:-1], k)
    assert_close(y, reference(inputs, activation="gelu"), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_threaded(run_fused, dtype):
    rng = np.random.default_rng(14)
    inputs = random_inputs(rng, shapes((1027, 256), 16), dtype)
    attributes = {"norm": "layer", "activation": "gelu", "out_activation": "sigmoid"}
    (y1,) = run_fused("NormActLinear", inputs, attributes, dtype, threads=1)
    (y2,) = run_fused("NormActLinear", inputs, attributes, dtype, threads=2)
    assert_close(y2, reference(inputs, "layer", "gelu", out_activation="sigmoid"), dtype)
    np.testing.assert_array_equal(y1, y2)


def test_empty_rows(run_fused):
    inputs = random_inputs(np.random.default_rng(15), shapes((0, 8), 3), "float32")
    (y,) = run_fused("NormActLinear", inputs, {}, "float32")
    assert y.shape == (0, 3)


@pytest.mark.parametrize("cols", [256, 1031])
def test_large_common_offset_keeps_full_precision(run_fused, cols):
    rng = np.random.default_rng(cols)
    inputs = offset_rows(rng, 16, cols)
    inputs["Weight"] = (rng.standard_normal((3, cols)) / np.sqrt(cols)).astype(np.float32)
    (y,) = run_fused("NormActLinear", inputs, {"norm": "layer"}, "float32")
    assert_close(y, reference(inputs), "float32")
