"""Constant folding goes on in rounds until one folds nothing: a slice whose bounds became constants
gets its static shape, and the ``Shape`` read of it folds in the next round (torchvision's Swin from
the TorchScript exporter: pad to whole windows, roll, crop back, each size computed from the last)."""

import numpy as np
import torch
import torch.nn.functional as F
from exporting import export_onnx, feeds_for, float64_reference, op_types, optimize_checked, run_onnx
from graphopt.passes.canonicalize import FOLD_CONSTANTS
from torch import nn

from graphopt.frontends.onnx import from_onnx


class Windows(nn.Module):
    """Shifted windows along one dim: pad to whole windows, roll, crop back, view, and the residual
    add into a LayerNorm."""

    def __init__(self, d=16, window=3):
        super().__init__()
        self.proj, self.norm, self.window = nn.Linear(d, d), nn.LayerNorm(d), window
        nn.init.normal_(self.norm.weight)

    def forward(self, x):
        h = self.proj(x)
        h = F.pad(h, (0, 0, 0, (self.window - h.shape[1] % self.window) % self.window))
        h = torch.roll(h, -1, 1)[:, : x.shape[1]]
        h = h.reshape(h.shape[0], -1, h.shape[2])
        return self.norm(x + h)


ARGS = (torch.randn(2, 8, 16),)


def _model():
    torch.manual_seed(0)
    module = Windows().eval()
    return module, export_onnx(module, ARGS, "torchscript")


def test_shapes_read_of_slices_with_folded_bounds_fold_too():
    _, model = _model()
    graph = from_onnx(model)
    FOLD_CONSTANTS.run(graph)
    assert not [n for n in graph if n.op == "shape"]
    (add,) = [
        n for n in graph if n.op == "add" and n.output.uses and n.output.uses[0].node.op == "layer_norm"
    ]
    assert [v.shape for v in add.inputs] == [(2, 8, 16), (2, 8, 16)]


def test_the_residual_add_then_fuses_and_computes_the_same():
    module, model = _model()
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("fuse_add_norm") == 1
    assert "Shape" not in op_types(optimized)
    (got,) = run_onnx(optimized, feeds_for(model, ARGS))
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-5, atol=1e-5)
