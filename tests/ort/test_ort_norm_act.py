import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from ort_models import assert_close, offset_rows, random_inputs

from graphopt.fused import NORM_ACT, Activation, Norm

DTYPES = ["float32", "float16", "bfloat16"]
ACTIVATIONS = [a.attr for a in Activation]
NORMS = [n.attr for n in Norm]


def reference(inputs, norm, activation, epsilon=1e-5, axis=-1):
    return NORM_ACT.reference(*inputs.values(), norm=norm, activation=activation, epsilon=epsilon, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_norm_and_activation(run_fused, dtype, norm, activation):
    rng = np.random.default_rng(0)
    inputs = random_inputs(rng, {"X": (6, 40), "Scale": (40,), "Bias": (40,)}, dtype)
    attributes = {"norm": norm, "activation": activation}
    (y,) = run_fused("NormAct", inputs, attributes, dtype)
    assert y.shape == (6, 40)
    assert_close(y, reference(inputs, norm, activation)[0], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "present",
    [
        (),
        ("Scale",),
        ("Bias",),
        ("Scale", "Bias"),
        ("Residual",),
        ("Scale", "Residual"),
        ("Scale", "Bias", "Residual"),
    ],
    ids=lambda p: "+".join(p) or "x_only",
)
def test_optional_inputs(run_fused, dtype, present):
    rng = np.random.default_rng(1)
    shapes = {"X": (5, 24), "Scale": (24,), "Bias": (24,), "Residual": (5, 24)}
    shapes = {k: (v if k == "X" or k in present else None) for k, v in shapes.items()}
    if "Residual" not in present:
        del shapes["Residual"]  # trailing absent inputs are simply left off the node
    inputs = random_inputs(rng, shapes, dtype)
    outputs = ("Y", "ResidualSum") if "Residual" in present else ("Y",)
    results = run_fused("NormAct", inputs, {"norm": "layer", "activation": "silu"}, dtype, outputs)
    expected_y, expected_sum = reference(inputs, "layer", "silu")
    assert_close(results[0], expected_y, dtype)
    if "Residual" in present:
        assert_close(results[1], expected_sum, dtype)


def test_residual_without_residual_sum_output(run_fused):
    rng = np.random.default_rng(2)
    inputs = random_inputs(rng, {"X": (3, 16), "Scale": (16,), "Bias": None, "Residual": (3, 16)}, "float32")
    (y,) = run_fused("NormAct", inputs, {"norm": "rms"}, "float32", outputs=("Y",))
    assert_close(y, reference(inputs, "rms", "identity")[0], "float32")


@pytest.mark.parametrize(
    ("shape", "axis"),
    [
        ((17,), 0),
        ((17,), -1),
        ((4, 9), 0),
        ((2, 3, 20), -1),
        ((2, 3, 20), -2),
        ((2, 3, 20), 1),
        ((2, 3, 4, 5), 2),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_ranks_and_axes(run_fused, shape, axis, dtype):
    rng = np.random.default_rng(3)
    normalized = shape[axis % len(shape) :]
    inputs = random_inputs(rng, {"X": shape, "Scale": normalized, "Bias": normalized}, dtype)
    (y,) = run_fused("NormAct", inputs, {"axis": axis, "activation": "gelu_tanh"}, dtype)
    assert_close(y, reference(inputs, "layer", "gelu_tanh", axis=axis)[0], dtype)


@pytest.mark.parametrize("epsilon", [0.0, 1e-6, 0.5])
def test_epsilon(run_fused, epsilon):
    rng = np.random.default_rng(4)
    inputs = random_inputs(rng, {"X": (4, 33)}, "float32")
    inputs["X"] *= 0.1  # small variance, so epsilon matters
    (y,) = run_fused("NormAct", inputs, {"norm": "rms", "epsilon": epsilon}, "float32")
    assert_close(y, reference(inputs, "rms", "identity", epsilon=epsilon)[0], "float32")


def test_defaults_are_layer_identity(run_fused):
    rng = np.random.default_rng(5)
    inputs = random_inputs(rng, {"X": (3, 10)}, "float32")
    (y,) = run_fused("NormAct", inputs, {}, "float32")
    assert_close(y, reference(inputs, "layer", "identity")[0], "float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_long_rows_threaded(run_fused, dtype):
    rng = np.random.default_rng(6)
    inputs = random_inputs(
        rng, {"X": (300, 1031), "Scale": (1031,), "Bias": (1031,), "Residual": (300, 1031)}, dtype
    )
    outputs = ("Y", "ResidualSum")
    attributes = {"norm": "layer", "activation": "gelu"}
    y1, s1 = run_fused("NormAct", inputs, attributes, dtype, outputs, threads=1)
    y2, s2 = run_fused("NormAct", inputs, attributes, dtype, outputs, threads=2)
    expected_y, expected_sum = reference(inputs, "layer", "gelu")
    assert_close(y2, expected_y, dtype)
    assert_close(s2, expected_sum, dtype)
    # Each row is computed whole by one thread, so threading must not change a single bit.
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(s1, s2)


def test_empty_rows(run_fused):
    inputs = {"X": np.zeros((0, 8), np.float32), "Scale": np.ones(8, np.float32)}
    (y,) = run_fused("NormAct", inputs, {}, "float32")
    assert y.shape == (0, 8)


def test_special_values_propagate(run_fused):
    x = np.ones((3, 8), np.float32)
    x[0, 1] = np.nan
    x[1, 2] = np.inf
    (y,) = run_fused("NormAct", {"X": x}, {"activation": "relu"}, "float32")
    assert np.isnan(y[0]).all()
    assert not np.isfinite(y[1]).any()
    np.testing.assert_array_equal(y[2], np.zeros(8, np.float32))


def onnx_layer_norm(inputs) -> np.ndarray:
    """ONNX Runtime's own LayerNormalization of the same float32 inputs (what the original computes)."""
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", list(inputs), ["Y"])],
        "layer_norm",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


@pytest.mark.parametrize("cols", [256, 1031])
def test_large_common_offset_keeps_full_precision(run_fused, cols):
    inputs = offset_rows(np.random.default_rng(cols), 16, cols)
    (y,) = run_fused("NormAct", inputs, {"norm": "layer"}, "float32")
    expected = reference(inputs, "layer", "identity")[0]
    assert_close(y, expected, "float32")
    assert np.abs(y - expected).max() <= np.abs(onnx_layer_norm(inputs) - expected).max()
