"""The library's CUDA execution provider kernels (run where onnxruntime-gpu and a GPU are present)."""

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper
from ort_models import assert_close, fused_model, offset_rows, random_inputs, storage_round

from graphopt.fused import DOMAIN, DOMAIN_VERSION, NORM_ACT, NORM_ACT_LINEAR
from graphopt.ort import create_session

pytestmark = [
    pytest.mark.usefixtures("library"),
    pytest.mark.skipif(
        "CUDAExecutionProvider" not in onnxruntime.get_available_providers(),
        reason="needs onnxruntime-gpu (CUDAExecutionProvider)",
    ),
]

CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]
DTYPES = ["float32", "float16", "bfloat16"]


def profile(session, inputs):
    """Runs the session once; returns the (op, provider) of every node it ran, and the outputs."""
    outputs = session.run(None, inputs)
    path = Path(session.end_profiling())
    events = json.loads(path.read_text())
    path.unlink()
    ran = [
        (e["args"]["op_name"], e["args"].get("provider", ""))
        for e in events
        if e.get("cat") == "Node" and "op_name" in e.get("args", {})
    ]
    return ran, outputs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [7, 256, 1000, 4096, 12289])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_norm_act_on_cuda(dtype, cols, norm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shapes = {"X": (37, cols), "Scale": (cols,), "Bias": (cols,), "Residual": (37, cols)}
    inputs = random_inputs(np.random.default_rng(cols), shapes, dtype)
    attributes = {"norm": norm, "activation": "gelu", "epsilon": 1e-5}
    model = fused_model("NormAct", inputs, attributes, dtype, ("Y", "ResidualSum"))
    ran, (y, residual_sum) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormAct", "CUDAExecutionProvider") in ran, ran
    expected_y, expected_sum = NORM_ACT.reference(*inputs.values(), **attributes, axis=-1)
    assert_close(y, expected_y, dtype)
    assert_close(residual_sum, expected_sum, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("cols", "k"), [(64, 1), (768, 8), (1000, 3), (4096, 16)])
def test_norm_act_linear_on_cuda(dtype, cols, k, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shapes = {"X": (2, 33, cols), "Scale": (cols,), "Bias": (cols,), "Weight": (k, cols), "LinearBias": (k,)}
    inputs = random_inputs(np.random.default_rng(k), shapes, dtype)
    attributes = {"norm": "layer", "activation": "silu", "epsilon": 1e-5, "out_activation": "sigmoid"}
    model = fused_model("NormActLinear", inputs, attributes, dtype)
    ran, (y,) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormActLinear", "CUDAExecutionProvider") in ran, ran
    assert_close(y, NORM_ACT_LINEAR.reference(*inputs.values(), **attributes), dtype)


@pytest.mark.parametrize("cols", [256, 1000, 12289])
def test_offset_rows_keep_full_precision_on_cuda(cols, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(cols)
    inputs = offset_rows(rng, 37, cols)
    model = fused_model("NormAct", inputs, {"norm": "layer"}, "float32")
    ran, (y,) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormAct", "CUDAExecutionProvider") in ran, ran
    assert_close(y, NORM_ACT.reference(*inputs.values(), norm="layer", activation="identity",
                                       epsilon=1e-5, axis=-1)[0], "float32")  # fmt: skip
    inputs["Weight"] = (rng.standard_normal((3, cols)) / np.sqrt(cols)).astype(np.float32)
    model = fused_model("NormActLinear", inputs, {"norm": "layer"}, "float32")
    ran, (y,) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormActLinear", "CUDAExecutionProvider") in ran, ran
    expected = NORM_ACT_LINEAR.reference(*inputs.values(), None, norm="layer", activation="identity",
                                         epsilon=1e-5, out_activation="identity")  # fmt: skip
    assert_close(y, expected, "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_residual_sum_is_rounded_before_the_norm_on_cuda(dtype, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = storage_round(np.full((4, 8), 1000.0, np.float32), dtype)
    r = np.linspace(0.05, 0.45, 8) * np.array([[1], [-1], [0.5], [2]])
    r = storage_round(r.astype(np.float32), dtype)
    inputs = {"X": x, "Scale": None, "Bias": None, "Residual": r}
    model = fused_model("NormAct", inputs, {"norm": "layer"}, dtype)
    ran, (y,) = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormAct", "CUDAExecutionProvider") in ran, ran
    stored = storage_round(x.astype(np.float32) + r.astype(np.float32), dtype)
    expected, _ = NORM_ACT.reference(stored, norm="layer", activation="identity", epsilon=1e-5, axis=-1)
    assert_close(y, expected, dtype)


def chain_model(middle):
    """X -> Relu -> middle(A, S) -> B -> Relu -> Y, with `middle` a node from A and S to B."""
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["A"]), middle, helper.make_node("Relu", ["B"], ["Y"])],
        "chain",
        [helper.make_tensor_value_info("X", f, ["n", 64]), helper.make_tensor_value_info("S", f, [64])],
        [helper.make_tensor_value_info("Y", f, ["n", 64])],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_no_copies_around_the_fused_node(tmp_path, monkeypatch):
    """The fused node takes and gives device memory: ORT runs it between two CUDA nodes with no
    more Memcpy nodes than around a standard CUDA op in its place."""
    monkeypatch.chdir(tmp_path)
    inputs = random_inputs(np.random.default_rng(0), {"X": (5, 64), "S": (64,)}, "float32")
    fused = chain_model(helper.make_node("NormAct", ["A", "S"], ["B"], domain=DOMAIN, norm="rms"))
    plain = chain_model(helper.make_node("Mul", ["A", "S"], ["B"]))
    ran_fused, _ = profile(create_session(fused, providers=CUDA, enable_profiling=True), inputs)
    ran_plain, _ = profile(create_session(plain, providers=CUDA, enable_profiling=True), inputs)
    assert ("NormAct", "CUDAExecutionProvider") in ran_fused, ran_fused
    assert all(
        provider == "CUDAExecutionProvider" for op, provider in ran_fused if not op.startswith("Memcpy")
    )
    copies = sorted(op for op, _ in ran_fused if op.startswith("Memcpy"))
    assert copies == sorted(op for op, _ in ran_plain if op.startswith("Memcpy")), ran_fused


def test_dynamic_rows_in_one_session():
    inputs = random_inputs(np.random.default_rng(1), {"X": (1, 512), "Scale": (512,)}, "float16")
    model = fused_model("NormAct", inputs, {"norm": "rms", "activation": "silu"}, "float16")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "rows"
    session = create_session(model, providers=CUDA)
    for rows in (1, 7, 1000, 0):
        x = np.random.default_rng(rows).standard_normal((rows, 512)).astype(np.float16)
        (y,) = session.run(None, {"X": x, "Scale": inputs["Scale"]})
        assert y.shape == (rows, 512)
        if rows:
            expected, _ = NORM_ACT.reference(
                x, inputs["Scale"], norm="rms", activation="silu", epsilon=1e-5, axis=-1
            )
            assert_close(y, expected, "float16")


def test_cuda_and_cpu_kernels_agree():
    inputs = random_inputs(
        np.random.default_rng(2), {"X": (64, 384), "Scale": (384,), "Bias": (384,)}, "float32"
    )
    model = fused_model("NormAct", inputs, {"activation": "gelu_tanh"}, "float32")
    (gpu,) = create_session(model, providers=CUDA).run(None, inputs)
    (cpu,) = create_session(model, providers=["CPUExecutionProvider"]).run(None, inputs)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)


def test_kernel_preferred_over_fallback_function_on_cuda(tmp_path, monkeypatch):
    onnx_functions = pytest.importorskip("graphopt.fused.onnx_functions")
    monkeypatch.chdir(tmp_path)
    inputs = random_inputs(
        np.random.default_rng(3), {"X": (16, 128), "Scale": (128,), "Bias": (128,)}, "float16"
    )
    model = fused_model("NormAct", inputs, {"activation": "gelu"}, "float16")
    onnx_functions.attach_functions(model)
    ran, _ = profile(create_session(model, providers=CUDA, enable_profiling=True), inputs)
    assert ran == [("NormAct", "CUDAExecutionProvider")], ran
