"""With the library registered, ORT runs graphopt's kernel even where the model carries a
model-local function of the same op; without the library it runs the function."""

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from ort_models import assert_close, fused_model, random_inputs

from graphopt.fused import DOMAIN, NORM_ACT
from graphopt.ort import create_session

pytestmark = pytest.mark.usefixtures("library")


def with_function(model, body, overload=""):
    """Adds a model-local graphopt::NormAct function (inputs X, outputs Y) with the given body."""
    function = helper.make_function(
        DOMAIN,
        "NormAct",
        ["X"],
        ["Y"],
        body,
        [helper.make_opsetid("", 21)],
        attributes=["norm", "activation"],
    )
    function.overload = overload
    model.functions.append(function)
    for node in model.graph.node:
        node.overload = overload
    return model


@pytest.mark.parametrize("overload", ["", "layer_identity"])
def test_registered_kernel_wins_over_model_local_function(overload):
    inputs = random_inputs(np.random.default_rng(0), {"X": (3, 8)}, "float32")
    # The function's body is deliberately not the op's math: the output tells which one ran.
    model = with_function(
        fused_model("NormAct", inputs, {}, "float32"), [helper.make_node("Neg", ["X"], ["Y"])], overload
    )
    (kernel,) = create_session(model, providers=["CPUExecutionProvider"]).run(None, inputs)
    (function,) = create_session(model, use_library=False, providers=["CPUExecutionProvider"]).run(
        None, inputs
    )
    assert_close(
        kernel,
        NORM_ACT.reference(inputs["X"], norm="layer", activation="identity", epsilon=1e-5, axis=-1)[0],
        "float32",
    )
    np.testing.assert_array_equal(function, -inputs["X"])


def profiled_ops(session, inputs) -> set[str]:
    session.run(None, inputs)
    profile = Path(session.end_profiling())
    events = json.loads(profile.read_text())
    profile.unlink()
    return {e["args"]["op_name"] for e in events if e.get("cat") == "Node" and "op_name" in e.get("args", {})}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_attached_fallback_functions_yield_to_the_kernel(dtype, tmp_path, monkeypatch):
    onnx_functions = pytest.importorskip("graphopt.fused.onnx_functions")
    monkeypatch.chdir(tmp_path)  # profiles are written to the working directory
    shapes = {"X": (4, 16), "Scale": (16,), "Bias": (16,), "Residual": (4, 16)}
    inputs = random_inputs(np.random.default_rng(1), shapes, dtype)
    model = fused_model(
        "NormAct", inputs, {"norm": "layer", "activation": "gelu"}, dtype, ("Y", "ResidualSum")
    )
    onnx_functions.attach_functions(model)
    assert model.functions and model.graph.node[0].overload

    # ORT opens a session's profile file when the session is created, named by the time of day: two
    # sessions alive at once could share one file. Distinct prefixes keep them apart.
    kernel = create_session(
        model, providers=["CPUExecutionProvider"], enable_profiling=True, profile_file_prefix="kernel"
    )
    function = create_session(
        model,
        use_library=False,
        providers=["CPUExecutionProvider"],
        enable_profiling=True,
        profile_file_prefix="function",
    )
    assert profiled_ops(kernel, inputs) == {"NormAct"}
    assert "NormAct" not in profiled_ops(function, inputs)
    for ours, theirs in zip(kernel.run(None, inputs), function.run(None, inputs), strict=True):
        assert_close(ours, theirs.astype(np.float64), dtype)


def test_registered_schema_replaces_the_function_for_other_types():
    """The library's registration decides the op's types: a float64 node, which no kernel takes, is
    refused rather than sent to its function. Fused ops must stay within the table's dtypes."""
    x = np.arange(8.0).reshape(2, 4)
    model = fused_model("NormAct", {"X": x}, {}, "float32")
    model.graph.input[0].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(x.dtype)
    model.graph.output[0].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(x.dtype)
    model = with_function(model, [helper.make_node("Neg", ["X"], ["Y"])])
    (function,) = create_session(model, use_library=False, providers=["CPUExecutionProvider"]).run(
        None, {"X": x}
    )
    np.testing.assert_array_equal(function, -x)
    with pytest.raises(Exception, match=r"tensor\(double\)"):
        create_session(model, providers=["CPUExecutionProvider"])
