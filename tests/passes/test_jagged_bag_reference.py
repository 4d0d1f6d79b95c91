"""Op.JAGGED_BAG's reference value (graphopt/analysis/jagged_bag.py) is what each form's original computes."""

import numpy as np
import onnx
import pytest
import torch
from exporting import export_onnx, feeds_for, run_onnx
from jagged_models import FEATURES, JaggedFront, jagged_inputs, weird_offsets

from graphopt.analysis.evaluate import evaluate
from graphopt.frontends.onnx import from_onnx
from graphopt.frontends.torch_export import from_exported_program
from graphopt.ir import Op, constant_of
from graphopt.pipeline import PIPELINE, run_passes


def _reference(original, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The pooled graph's jagged_bag evaluated by its reference on ``feeds``: [N, B, D]."""
    graph = from_onnx(original) if isinstance(original, onnx.ModelProto) else from_exported_program(original)
    run_passes(graph, PIPELINE)
    (node,) = graph.nodes_of((Op.JAGGED_BAG,))
    arrays = [feeds[v.name] if constant_of(v) is None else constant_of(v).numpy() for v in node.inputs]
    return evaluate(node, arrays)[0]


@pytest.mark.parametrize("weird", [False, True])
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("path", ["torchscript", "dynamo", "torch.export"])
def test_reference_is_the_originals_pooled_bags(path, mode, weird):
    if weird and path == "torch.export":
        pytest.skip("offsets outside torch's contract: torch refuses or disagrees with itself")
    n = FEATURES[path]
    module = JaggedFront(n, mode, last_offset=True).eval()
    args = list(jagged_inputs(n, last_offset=True))
    if weird:
        for k in range(n):
            args[1 + n + k] = weird_offsets(len(args[1 + k]), True)
    args = tuple(args)
    if path == "torch.export":
        original = torch.export.export(module, args)
        names = [s.arg.name for s in original.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        feeds = {name: a.numpy() for name, a in zip(names, args, strict=True)}
        with torch.no_grad():
            stacked = module(*args).numpy()
    else:
        original = export_onnx(module, jagged_inputs(n, last_offset=True), path)
        feeds = feeds_for(original, args)
        stacked = run_onnx(original, feeds)[0]
    expected = stacked[:, 1:].transpose(1, 0, 2)  # (the dense input first, then the N features' bags)
    np.testing.assert_allclose(_reference(original, feeds), expected, rtol=1e-6, atol=1e-6)
