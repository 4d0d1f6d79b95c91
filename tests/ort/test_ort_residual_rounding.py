"""A residual sum is rounded to the storage type before the norm sees it, as the unfused graph stores
it: the library's kernel, the model-local fallback function and the original graph agree, so an
optimized model computes the same whether or not the library is registered."""

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from ort_models import assert_close

import graphopt
from graphopt.fused import NORM_ACT
from graphopt.ort import create_session

pytestmark = [pytest.mark.usefixtures("library"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ELEM = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}


def residual_layer_norm(dtype: str, width: int) -> onnx.ModelProto:
    """y = LayerNormalization(x + r) in ``dtype``, no scale or bias of note, no activation; bfloat16
    models take and give float32 with Casts at the edges (ORT's Python binding has no bfloat16)."""
    elem = ELEM[dtype]
    io = TensorProto.FLOAT if dtype == "bfloat16" else elem
    nodes = []
    names = {"x": "x", "r": "r"}
    if dtype == "bfloat16":
        nodes += [helper.make_node("Cast", [n], [f"{n}_s"], to=elem) for n in names]
        names = {n: f"{n}_s" for n in names}
    scale = helper.make_tensor("scale", elem, [width], np.ones(width).astype(np.float32).tolist())
    nodes += [
        helper.make_node("Add", [names["x"], names["r"]], ["s"]),
        helper.make_node("LayerNormalization", ["s", "scale"], ["y_s" if dtype == "bfloat16" else "y"]),
    ]
    if dtype == "bfloat16":
        nodes.append(helper.make_node("Cast", ["y_s"], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        nodes,
        "residual_layer_norm",
        [helper.make_tensor_value_info(n, io, ["rows", width]) for n in ("x", "r")],
        [helper.make_tensor_value_info("y", io, ["rows", width])],
        [scale],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def storage(values, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    return np.asarray(values, np.float32).astype(dtype)


def rounded_sum_reference(x, r, dtype: str) -> np.ndarray:
    """LayerNorm in float64 of x + r rounded to ``dtype``: what ONNX semantics compute."""
    s = storage(x.astype(np.float32) + r.astype(np.float32), dtype)
    y, _ = NORM_ACT.reference(s, norm="layer", activation="identity", epsilon=1e-5, axis=-1)
    return y


def run(model, feeds, use_library: bool) -> np.ndarray:
    session = create_session(model, use_library=use_library, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, feeds)
    return y


def offset_inputs(dtype: str) -> dict[str, np.ndarray]:
    """x = 1000 and r from 0.05 to 0.45 along each 8-wide row: the sums round to two values."""
    x = storage(np.full((4, 8), 1000.0), dtype)
    r = storage(np.tile(np.linspace(0.05, 0.45, 8), (4, 1)) * np.array([[1], [-1], [0.5], [2]]), dtype)
    return {"x": x, "r": r}


def original_outputs(model, feeds, dtype: str) -> np.ndarray | None:
    """The unfused model's outputs in ORT; None for bfloat16, whose Add ORT's CPU provider lacks."""
    return run(model, feeds, use_library=False) if dtype == "float16" else None


def with_and_without_library(optimized, feeds, dtype: str) -> list[np.ndarray]:
    """The optimized model's outputs with the library and, where the original runs, without it (its
    fallback function computes in X's type, as the original does: in bfloat16 ORT's CPU provider runs
    neither)."""
    if dtype == "bfloat16":
        with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
            run(optimized, feeds, use_library=False)
        return [run(optimized, feeds, use_library=True)]
    return [run(optimized, feeds, use_library) for use_library in (True, False)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sum_is_rounded_before_the_norm(dtype):
    feeds = offset_inputs(dtype)
    model = residual_layer_norm(dtype, 8)
    optimized, _ = graphopt.optimize(model, verify=False)
    assert [n.op_type for n in optimized.graph.node if n.domain == "graphopt"] == ["NormAct"]
    expected = rounded_sum_reference(feeds["x"], feeds["r"], dtype)
    original = original_outputs(model, feeds, dtype)
    if original is not None:
        assert_close(original, expected, dtype)
    for y in with_and_without_library(optimized, feeds, dtype):
        assert_close(y, expected, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sum_that_overflows_gives_nan_rows(dtype):
    top = float(np.finfo(np.float16).max if dtype == "float16" else ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    feeds = offset_inputs(dtype)
    feeds["x"][0] = storage(np.full(8, top), dtype)  # row 0: x + r overflows in four lanes
    feeds["r"][0] = storage(np.linspace(-top / 4, top / 4, 8), dtype)
    model = residual_layer_norm(dtype, 8)
    optimized, _ = graphopt.optimize(model, verify=False)
    expected = rounded_sum_reference(feeds["x"], feeds["r"], dtype)
    assert np.isnan(expected[0]).all() and np.isfinite(expected[1:]).all()
    original = original_outputs(model, feeds, dtype)
    if original is not None:
        np.testing.assert_array_equal(np.isnan(original), np.isnan(expected))
    for y in with_and_without_library(optimized, feeds, dtype):
        np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
        assert_close(y[1:], expected[1:], dtype)
