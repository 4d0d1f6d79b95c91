"""The C++ NormAct kernel (CPU EP) with operands broadcast over X's leading dims, against the spec's
float64 reference; shapes it cannot read are named in one-line errors."""

import numpy as np
import onnxruntime
import pytest
from ort_models import assert_close, fused_model, random_inputs, run_model
from test_ort_cuda import CUDA, profile

from graphopt.fused import NORM_ACT
from graphopt.ort import create_session

DTYPES = ["float32", "float16", "bfloat16"]


def reference(inputs, norm, activation):
    return NORM_ACT.reference(*inputs.values(), norm=norm, activation=activation, epsilon=1e-5, axis=-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes",
    [
        {"X": (6, 5, 40), "Scale": (6, 1, 40), "Bias": (6, 1, 40)},  # per-feature
        {"X": (4, 5, 40), "Scale": (4, 1, 40), "Bias": (40,)},  # scale per slice, bias shared
        {"X": (2, 16, 64), "Scale": (64,), "Bias": (64,), "Residual": (1, 16, 64)},  # DistilBERT
        {"X": (2, 32, 64), "Scale": (64,), "Bias": (64,), "Residual": (32, 64)},  # Whisper
        {"X": (3, 4, 2, 24), "Scale": (4, 1, 24), "Bias": None, "Residual": (3, 4, 1, 24)},
    ],
    ids=["per_slice", "scale_per_slice", "residual_1tD", "residual_tD", "mixed"],
)
def test_broadcast_operands(run_fused, dtype, shapes):
    inputs = random_inputs(np.random.default_rng(3), shapes, dtype)
    outputs = ("Y", "ResidualSum") if "Residual" in shapes else ("Y",)

    results = run_fused("NormAct", inputs, {"norm": "layer", "activation": "gelu"}, dtype, outputs)

    expected_y, expected_sum = reference(inputs, "layer", "gelu")
    assert results[0].shape == shapes["X"]
    assert_close(results[0], expected_y, dtype)
    if "Residual" in shapes:
        assert results[1].shape == shapes["X"]
        assert_close(results[1], expected_sum, dtype)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (
            {"X": (3, 4, 8), "Scale": (3, 4, 1, 8)},
            r"input Scale has shape \[3, 4, 1, 8\]; its rank is above X's",
        ),
        (
            {"X": (3, 4, 8), "Scale": None, "Bias": (2, 1, 8)},
            r"input Bias has shape \[2, 1, 8\]; it is not a broadcast",
        ),
        (
            {"X": (3, 4, 5, 8), "Scale": None, "Bias": None, "Residual": (3, 1, 5, 8)},
            r"input Residual has shape \[3, 1, 5, 8\]; it broadcasts over more than one block",
        ),
    ],
)
def test_unreadable_shapes_are_named(shapes, message):
    inputs = random_inputs(np.random.default_rng(4), shapes, "float32")
    with pytest.raises(Exception, match=message):
        run_model(fused_model("NormAct", inputs, {}, "float32"), inputs)


@pytest.mark.usefixtures("library")
@pytest.mark.skipif(
    "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
    reason="needs onnxruntime-gpu (CUDAExecutionProvider)",
)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes",
    [
        {"X": (64, 9, 256), "Scale": (64, 1, 256), "Bias": (64, 1, 256)},
        {"X": (4, 37, 1000), "Scale": (4, 1, 1000), "Bias": (1000,), "Residual": (37, 1000)},
        {"X": (3, 5, 12289), "Scale": (3, 1, 12289), "Bias": None, "Residual": (1, 5, 12289)},
    ],
    ids=["per_slice", "residual_td", "looped"],
)
def test_broadcast_operands_on_cuda(dtype, shapes, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inputs = random_inputs(np.random.default_rng(5), shapes, dtype)
    outputs = ("Y", "ResidualSum") if "Residual" in shapes else ("Y",)
    model = fused_model("NormAct", inputs, {"norm": "layer", "activation": "gelu"}, dtype, outputs)
    session = create_session(model, providers=CUDA, enable_profiling=True)
    ran, results = profile(session, inputs)
    assert ("NormAct", "CUDAExecutionProvider") in ran, ran
    expected_y, expected_sum = reference(inputs, "layer", "gelu")
    assert_close(results[0], expected_y, dtype)
    if "Residual" in shapes:
        assert_close(results[1], expected_sum, dtype)
