"""AffineAct on the library's CUDA execution provider kernel (where onnxruntime-gpu and a GPU are present)."""

import numpy as np
import onnxruntime
import pytest
from ort_models import assert_close, fused_model, random_inputs
from test_ort_cuda import CUDA, DTYPES, profile

from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.ort import create_session

pytestmark = [
    pytest.mark.usefixtures("library"),
    pytest.mark.skipif(
        "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
        reason="needs onnxruntime-gpu (CUDAExecutionProvider)",
    ),
]

# (X shape, axis): linear biases of aligned, unaligned and looped widths; batch norms over NCHW.
LAYOUTS = [((4, 33, 768), -1), ((37, 1000), -1), ((3, 5000), -1), ((4, 64, 56, 56), 1), ((8, 576, 7, 7), 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "axis"), LAYOUTS)
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "silu"])
def test_affine_act_on_cuda(activation, shape, axis, dtype, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    channels = shape[axis]
    inputs = random_inputs(
        np.random.default_rng(channels), {"X": shape, "Scale": (channels,), "Bias": (channels,)}, dtype
    )
    attributes = {"activation": activation, "axis": axis}
    model = fused_model("AffineAct", inputs, attributes, dtype)
    ran, (y,) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("AffineAct", "CUDAExecutionProvider") in ran, ran
    assert_close(y, AFFINE_ACT.reference(*inputs.values(), **attributes), dtype)
