"""GroupNormAct on ONNX Runtime's CUDA execution provider: the ahead-of-time Triton kernels launched by
the library, the whole kernel and the split pair with its scratch from ORT's allocator (run where
onnxruntime-gpu and a GPU are present)."""

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from ort_models import assert_close, fused_model, random_inputs, storage_round

from graphopt.fused.group_norm_act import launch_rule
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


# (2, 32, 8, 8) and (2, 12, 7): the whole kernel; (1, 64, 64, 64): 4 runs of 65536, split in aligned
# chunks; (3, 96, 45, 45): 12 runs of 48600 (no multiple of 16), split unaligned.
SHAPES = [(2, 32, 8, 8), (1, 64, 64, 64), (3, 96, 45, 45), (2, 12, 7)]


def test_the_shapes_take_both_paths():
    def splits(shape):
        spatial = int(np.prod(shape[2:]))
        rows, group_size = shape[0] * 4, shape[1] // 4 * spatial
        return (
            launch_rule.split_launch(rows, group_size, spatial, "float32", group_size % 16 == 0) is not None
        )

    assert [splits(shape) for shape in SHAPES] == [False, True, True, False]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
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


@pytest.mark.parametrize("shape", [(2, 16, 6, 6), (1, 64, 64, 64)])
def test_large_common_offset_on_cuda(shape, tmp_path, monkeypatch):
    # 1000 + 0.1 * noise with scales up to 200: statistics not taken around a shift lose the noise's
    # low bits; the split's merged partials keep float32's tolerance as the whole kernel does.
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(7)
    inputs = {
        "X": (1000.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32),
        "Scale": rng.uniform(0.0, 200.0, shape[1]).astype(np.float32),
        "Bias": rng.standard_normal(shape[1]).astype(np.float32),
    }
    attributes = {"groups": 4, "activation": "identity", "epsilon": 1e-5}
    model = fused_model("GroupNormAct", inputs, attributes, "float32")
    on_cuda, results = ran_on_cuda(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert on_cuda
    expected, _ = GROUP_NORM_ACT.reference(inputs["X"], inputs["Scale"], inputs["Bias"], **attributes)
    assert_close(results[0], expected, "float32")
