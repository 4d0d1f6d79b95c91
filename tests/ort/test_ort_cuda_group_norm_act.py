"""GroupNormAct on ONNX Runtime's CUDA execution provider: the ahead-of-time Triton kernel launched by
the library (run where onnxruntime-gpu and a GPU are present)."""

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from ort_models import assert_close, fused_model, random_inputs, storage_round

from graphopt.fused.group_norm_act.spec import GROUP_NORM_ACT
from graphopt.ort import create_session

pytestmark = [
    pytest.mark.usefixtures("library"),
    pytest.mark.skipif(
        "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
        reason="needs onnxruntime-gpu (CUDAExecutionProvider)",
    ),
]

CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def ran_on_cuda(session, inputs):
    outputs = session.run(None, inputs)
    path = Path(session.end_profiling())
    events = json.loads(path.read_text())
    path.unlink()
    ran = {
        (e["args"]["op_name"], e["args"].get("provider", ""))
        for e in events
        if "op_name" in e.get("args", {})
    }
    return ("GroupNormAct", "CUDAExecutionProvider") in ran, outputs


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 32, 8, 8), (1, 64, 64, 64), (3, 96, 45, 45), (2, 12, 7)])
@pytest.mark.parametrize("outputs", [("Y",), ("Y", "ResidualSum")])
def test_group_norm_act_on_cuda(dtype, shape, outputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    channels = shape[1]
    shapes = {"X": shape, "Scale": (channels,), "Bias": (channels,), "Residual": shape}
    inputs = random_inputs(np.random.default_rng(channels), shapes, dtype)
    attributes = {"groups": 4, "activation": "silu", "epsilon": 1e-5}
    model = fused_model("GroupNormAct", inputs, attributes, dtype, outputs)
    on_cuda, results = ran_on_cuda(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert on_cuda
    stored = storage_round(inputs["X"].astype(np.float32) + inputs["Residual"].astype(np.float32), dtype)
    expected, _ = GROUP_NORM_ACT.reference(stored, inputs["Scale"], inputs["Bias"], **{
        "groups": 4, "activation": "silu", "epsilon": 1e-5})  # fmt: skip
    assert_close(results[0], expected, dtype)
    if len(outputs) == 2:
        assert_close(results[1], stored, dtype)
