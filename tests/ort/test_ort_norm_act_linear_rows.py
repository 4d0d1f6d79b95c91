"""The C++ NormActLinear kernels with a residual (and its sum) and with operands read row by row
(per-slice scale, bias, weight matrices and linear bias; broadcast residuals), against the spec's
float64 reference; the CPU EP here, the CUDA EP where onnxruntime-gpu and a GPU are present. Shapes
the kernels cannot read are named in one-line errors."""

import numpy as np
import onnxruntime
import pytest
from ort_models import assert_close, fused_model, random_inputs, run_model, storage_round
from test_ort_cuda import CUDA, profile

from graphopt.fused import NORM_ACT_LINEAR
from graphopt.ort import create_session

DTYPES = ["float32", "float16", "bfloat16"]
PORTS = ("X", "Scale", "Bias", "Weight", "LinearBias", "Residual")
ATTRIBUTES = {"norm": "layer", "activation": "gelu", "out_activation": "tanh"}

# name: shapes of X, Scale, Bias, Weight, LinearBias, Residual (None: absent)
CASES = {
    "residual": ((7, 48), (48,), (48,), (5, 48), (5,), (7, 48)),
    "residual_1tD": ((2, 16, 64), (64,), (64,), (4, 64), (4,), (1, 16, 64)),
    "residual_tD": ((2, 32, 64), (64,), None, (4, 64), None, (32, 64)),
    "per_feature_norms": ((32, 3, 64), (32, 1, 64), (32, 1, 64), (1, 64), (1,), None),
    "per_feature_linears": ((32, 3, 64), (32, 1, 64), (32, 1, 64), (32, 4, 64), (32, 1, 4), None),
    "everything": ((6, 5, 40), (6, 1, 40), (6, 1, 40), (6, 3, 40), (6, 1, 3), (5, 40)),
    "inner_slices": ((2, 4, 3, 24), (4, 1, 24), None, (4, 2, 24), (4, 1, 2), (2, 4, 3, 24)),
    # 20 outputs: the CPU kernel's output groups (five of four), each feature's 3 rows one register
    # block padded to four (test_ort_norm_act_linear_blocks.py covers the blocks at every width)
    "per_feature_wide_linears": ((8, 3, 40), (8, 1, 40), (8, 1, 40), (8, 20, 40), (8, 1, 20), (3, 40)),
}


def inputs_of(case, dtype, seed=0):
    return random_inputs(np.random.default_rng(seed), dict(zip(PORTS, CASES[case], strict=True)), dtype)


def expected(inputs, dtype, attributes=ATTRIBUTES):
    """Y and ResidualSum of the reference, the norm reading X + Residual added in float32 and
    rounded to storage, as the unfused graph stores it."""
    x, residual = inputs["X"], inputs.get("Residual")
    s = x if residual is None else storage_round(x.astype(np.float32) + residual.astype(np.float32), dtype)
    y = NORM_ACT_LINEAR.reference(
        s, inputs.get("Scale"), inputs.get("Bias"), inputs["Weight"], inputs.get("LinearBias"),
        norm=attributes["norm"], activation=attributes["activation"], epsilon=1e-5,
        out_activation=attributes["out_activation"],
    )  # fmt: skip
    return y, s


def outputs_of(inputs):
    return ("Y", "ResidualSum") if inputs.get("Residual") is not None else ("Y",)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_rows_and_residuals(run_fused, dtype, case):
    inputs = inputs_of(case, dtype)

    results = run_fused("NormActLinear", inputs, ATTRIBUTES, dtype, outputs_of(inputs))

    y, s = expected(inputs, dtype)
    assert results[0].shape == y.shape
    assert_close(results[0], y, dtype)
    if inputs["Residual"] is not None:
        np.testing.assert_array_equal(results[1], s)


def test_a_residual_whose_sum_nobody_asks_for(run_fused):
    inputs = inputs_of("everything", "float32")
    (y,) = run_fused("NormActLinear", inputs, ATTRIBUTES, "float32", ("Y",))
    assert_close(y, expected(inputs, "float32")[0], "float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_threaded(run_fused, dtype):
    # Chunks of rows whose boundaries fall inside features: each row must keep its own matrix.
    shapes = {"X": (37, 29, 256), "Scale": (37, 1, 256), "Bias": (37, 1, 256), "Weight": (37, 3, 256),
              "LinearBias": (37, 1, 3), "Residual": (37, 29, 256)}  # fmt: skip
    inputs = random_inputs(np.random.default_rng(1), shapes, dtype)
    y1, s1 = run_fused("NormActLinear", inputs, ATTRIBUTES, dtype, ("Y", "ResidualSum"), threads=1)
    y2, s2 = run_fused("NormActLinear", inputs, ATTRIBUTES, dtype, ("Y", "ResidualSum"), threads=2)
    assert_close(y2, expected(inputs, dtype)[0], dtype)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(s1, s2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_norm_reads_the_sum_rounded_to_storage(run_fused, dtype):
    # X = 1000 and R = 0.05..0.45: stored, each row's sums take one or two values.
    ramp = np.linspace(0.05, 0.45, 16) * np.array([[1.0], [-1.0], [0.5]])
    weight = np.random.default_rng(2).standard_normal((2, 16))
    values = (np.full((3, 16), 1000.0), None, None, weight, None, ramp)
    inputs = dict(zip(PORTS, values, strict=True))
    inputs = {k: None if v is None else storage_round(v.astype(np.float32), dtype) for k, v in inputs.items()}
    attributes = {"norm": "layer", "activation": "identity", "out_activation": "identity"}
    y, s = run_fused("NormActLinear", inputs, attributes, dtype, ("Y", "ResidualSum"))
    want_y, want_s = expected(inputs, dtype, attributes)
    np.testing.assert_array_equal(s, want_s)
    assert_close(y, want_y, dtype)


def test_no_outputs_still_writes_the_residual_sum(run_fused):
    shapes = dict(zip(PORTS, ((5, 32), None, None, (0, 32), None, (5, 32)), strict=True))
    inputs = random_inputs(np.random.default_rng(3), shapes, "float32")
    y, s = run_fused("NormActLinear", inputs, ATTRIBUTES, "float32", ("Y", "ResidualSum"))
    assert y.shape == (5, 0)
    np.testing.assert_array_equal(s, inputs["X"] + inputs["Residual"])


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (
            {"X": (8, 3, 16), "Weight": (3, 4, 16)},
            r"input Weight has shape \[3, 4, 16\]; its leading dims must pick one \[K, D\] matrix per block "
            r"of X's rows: it is not a broadcast of X \(X has shape \[8, 3, 16\]\)",
        ),
        (
            {"X": (3, 16), "Weight": (8, 4, 16)},
            r"input Weight has shape \[8, 4, 16\]; its leading dims .* its rank is above X's",
        ),
        (
            {"X": (2, 3, 4, 5, 16), "Weight": (2, 1, 4, 2, 16)},
            r"input Weight has shape \[2, 1, 4, 2, 16\]; .* more than one block",
        ),
        (
            {"X": (8, 3, 16), "Weight": (4, 16), "LinearBias": (3, 1, 4)},
            r"input LinearBias has shape \[3, 1, 4\]; expected \[4\] or a broadcast of it over one block of "
            r"Y's leading dims, but it is not a broadcast of X \(Y has shape \[8, 3, 4\]\)",
        ),
        (
            {"X": (8, 3, 16), "Weight": (4, 16), "Residual": (2, 1, 16)},
            r"input Residual has shape \[2, 1, 16\]; expected X's shape or a broadcast",
        ),
        (
            {"X": (8, 3, 16), "Scale": (8, 3, 1, 16), "Weight": (4, 16)},
            r"input Scale has shape \[8, 3, 1, 16\]; expected \[16\] or a broadcast .* its rank is above",
        ),
    ],
)
def test_unreadable_shapes_are_named(library, shapes, message):
    full = {port: shapes.get(port) for port in PORTS}
    while full[next(reversed(full))] is None:
        full.popitem()
    inputs = random_inputs(np.random.default_rng(4), full, "float32")
    with pytest.raises(Exception, match=message):
        run_model(fused_model("NormActLinear", inputs, ATTRIBUTES, "float32", outputs_of(inputs)), inputs)


@pytest.mark.usefixtures("library")
@pytest.mark.skipif(
    "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
    reason="needs onnxruntime-gpu (CUDAExecutionProvider)",
)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes",
    [
        {"X": (128, 1024, 256), "Scale": (128, 1, 256), "Bias": (128, 1, 256), "Weight": (1, 256),
         "LinearBias": (1,), "Residual": None},
        {"X": (128, 1024, 256), "Scale": (128, 1, 256), "Bias": (128, 1, 256), "Weight": (128, 4, 256),
         "LinearBias": (128, 1, 4), "Residual": None},
        {"X": (8, 128, 64), "Scale": (64,), "Bias": None, "Weight": (4, 64), "LinearBias": (4,),
         "Residual": (8, 128, 64)},
        {"X": (3, 5, 12289), "Scale": (3, 1, 12289), "Bias": None, "Weight": (3, 17, 12289),
         "LinearBias": (3, 1, 17), "Residual": (5, 12289)},
    ],
    ids=["per_feature_norms", "per_feature_linears", "residual", "looped"],
)  # fmt: skip
def test_rows_and_residuals_on_cuda(dtype, shapes, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inputs = random_inputs(np.random.default_rng(5), shapes, dtype)
    model = fused_model("NormActLinear", inputs, ATTRIBUTES, dtype, outputs_of(inputs))
    session = create_session(model, providers=CUDA, enable_profiling=True)
    ran, results = profile(session, inputs)
    assert ("NormActLinear", "CUDAExecutionProvider") in ran, ran
    y, s = expected(inputs, dtype)
    assert_close(results[0], y, dtype)
    if inputs["Residual"] is not None:
        np.testing.assert_array_equal(results[1], s)
