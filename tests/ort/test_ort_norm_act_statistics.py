"""Layer norm statistics of the CPU kernel on rows the fuzzing of damaged weights found: a row whose
first element is far from the rest, and values whose squares are beyond float32's top."""

import numpy as np

# A value 0.1 above its row's mean, the row's first element 3e6: the statistics of the row
# shifted by its first element round that difference to exactly 0 (a shift of 3e6 rounds to 0.25),
# and a damaged scale of -inf there made 0 * -inf = NaN where the unfused norm gives tanh(-inf) = -1.
FAR_FIRST = np.array(
    [3000000.0, 189.05337524414062, -522.7484130859375, -413.06353759765625, -2441.46728515625,
     1799.7073974609375, 1144.1658935546875, 428536.625],
    np.float32,
)  # fmt: skip


def _layer_norm(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=-1, keepdims=True) + 1e-5) * scale


def test_a_value_near_the_mean_of_a_row_whose_first_element_is_far_keeps_its_sign(run_fused):
    scale = np.ones(8, np.float32)
    scale[7] = -np.inf
    inputs = {"X": FAR_FIRST[None, :], "Scale": scale}
    (y,) = run_fused("NormAct", inputs, {"norm": "layer", "activation": "tanh"}, "float32")
    assert y[0, 7] == -1.0
    np.testing.assert_allclose(y[0, :7], np.tanh(_layer_norm(FAR_FIRST, 1.0)[:7]), rtol=1e-6)


def test_squares_beyond_float32s_top_leave_a_finite_variance(run_fused):
    """A weight damaged to 5e37 made rows like these (mlp.onnx, fuzz case 4628): their variance
    overflowed in float32 and every value of the row came out NaN; the unfused norm is finite."""
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    x[:, 5] = np.float32(5e36)
    scale = np.linspace(0.5, 1.5, 16, dtype=np.float32)
    inputs = {"X": x, "Scale": scale}
    (y,) = run_fused("NormAct", inputs, {"norm": "layer", "activation": "identity"}, "float32")
    np.testing.assert_allclose(y, _layer_norm(x, scale), rtol=1e-5, atol=1e-6)
    (y,) = run_fused("NormAct", inputs, {"norm": "rms", "activation": "identity"}, "float32")
    rms = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, rms * scale, rtol=1e-5, atol=1e-6)
