"""Folded constants are correctly rounded: transcendental ops are evaluated in float64 and rounded
to the value's type once. NumPy's float32 ``exp`` misses by an ulp on many inputs, and diffusers'
sinusoidal timestep embedding, ``sin(t * exp(-k * arange(D)))``, multiplies those ulps by timesteps
the numeric check's large draw makes near 1e6: the check refused the folded model."""

import math

import numpy as np
import onnx
import pytest
import torch
from exporting import export_onnx, export_torch, feeds_for, float64_reference, optimize_checked, run_onnx
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import graphopt

FREQUENCIES = 128


class Timesteps(nn.Module):
    def forward(self, t):
        exponent = -math.log(10000) * torch.arange(FREQUENCIES, dtype=torch.float32) / (FREQUENCIES - 1)
        return torch.sin(t[:, None] * torch.exp(exponent)[None, :])


ARGS = (torch.tensor([10.0, 500.0]),)

UNARY = {
    "Exp": lambda x: np.exp(x),
    "Tanh": lambda x: np.tanh(x),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


def _folded(op: str, values: np.ndarray) -> np.ndarray:
    constant = numpy_helper.from_array(values, "c")
    graph = helper.make_graph(
        [helper.make_node(op, ["c"], ["f"]), helper.make_node("Add", ["x", "f"], ["y"])],
        "fold",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(values.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(values.shape))],
        [constant],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    optimized = graphopt.optimize(model, only=["fold_constants", "remove_dead_nodes"], verify=False).model
    (add,) = optimized.graph.node
    (folded,) = [numpy_helper.to_array(t) for t in optimized.graph.initializer if t.name in add.input]
    return folded


@pytest.mark.parametrize("op", sorted(UNARY))
def test_a_folded_transcendental_is_the_float32_nearest_the_exact_value(op):
    values = np.arange(-FREQUENCIES, FREQUENCIES, dtype=np.float32) * np.float32(-math.log(10000) / 127)
    exact = UNARY[op](values.astype(np.float64))
    folded = _folded(op, values)
    assert folded.dtype == np.float32
    np.testing.assert_array_equal(folded, exact.astype(np.float32))


def _unoptimized_dynamo(module) -> onnx.ModelProto:
    """The dynamo exporter's graph before its own optimizer folds the embedding: a Range whose step is a
    Cast of 1 (the float64 check once put noise on it and got a range one element longer)."""
    return torch.onnx.export(module, ARGS, dynamo=True, optimize=False, verbose=False).model_proto


@pytest.mark.parametrize("form", ["dynamo", "dynamo_unoptimized", "torchscript", "torch_export"])
def test_the_timestep_embedding_folds_and_passes_the_check(form):
    module = Timesteps().eval()
    if form == "torch_export":
        optimized, report = graphopt.optimize(export_torch(module, ARGS, "export"))
        got = optimized.module()(*ARGS).detach().numpy()
        original = module(*ARGS).numpy()
    else:
        unoptimized = form == "dynamo_unoptimized"
        model = _unoptimized_dynamo(module) if unoptimized else export_onnx(module, ARGS, form)
        optimized, report = optimize_checked(model)
        assert isinstance(optimized, onnx.ModelProto)
        (got,) = run_onnx(optimized, feeds_for(model, ARGS))
        (original,) = run_onnx(model, feeds_for(model, ARGS))
    if form in ("dynamo_unoptimized", "torch_export"):  # (the other exporters fold it themselves)
        assert report.rule_counts.get("fold_constant", 0) >= 1
    # (the float32 model's own frequencies are rounded: at t = 500 that alone is 3e-5 from the exact
    # answer, so the bar is the original's distance from it, as the numeric check's second opinion has it)
    exact = float64_reference(module, ARGS)[0]
    assert np.abs(got - exact).max() <= np.abs(original - exact).max() + 1e-6
