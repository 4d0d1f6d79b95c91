"""ONNX ops the IR carries verbatim get their output shapes from ONNX's inference for the op once
constant folding has made their inputs constant: the TorchScript exporter's class-token concat
(``Expand`` to a shape it computes with ``Where``/``Equal``) has a static sequence length then, and the
residual add into the first norm, whose other operand is static, fuses."""

import numpy as np
import pytest
import torch
from exporting import export_onnx, feeds_for, float64_reference, op_types, optimize_checked, run_onnx
from graphopt.passes.canonicalize import FOLD_CONSTANTS
from torch import nn

from graphopt.frontends.onnx import from_onnx


class ClassTokenBlock(nn.Module):
    """A class token concatenated to the patches, one attention with a learned position bias (BEiT's
    relative position bias: it makes the scores' shape static), a residual add into a LayerNorm."""

    def __init__(self, tokens: int = 8, dim: int = 16):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.bias = nn.Parameter(torch.randn(1, tokens + 1, tokens + 1))
        self.value, self.norm = nn.Linear(dim, dim), nn.LayerNorm(dim)
        nn.init.normal_(self.norm.weight)

    def forward(self, x):
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        scores = torch.softmax(h @ h.transpose(1, 2) / 4 + self.bias, -1)
        return self.norm(h + scores @ self.value(h))


ARGS = (torch.randn(2, 8, 16),)


def test_an_expand_to_a_folded_shape_gets_its_static_shape():
    torch.manual_seed(0)
    model = export_onnx(ClassTokenBlock().eval(), ARGS, "torchscript")
    assert "Where" in op_types(model)  # (the shape Expand reads is computed in the graph)
    graph = from_onnx(model)
    (concat,) = [n for n in graph if n.op == "concat"]
    assert concat.output.shape[1] is None
    FOLD_CONSTANTS.run(graph)
    assert [v.shape for v in concat.inputs] == [(2, 1, 16), (2, 8, 16)]
    assert concat.output.shape == (2, 9, 16)


@pytest.mark.parametrize("path", ["torchscript", "dynamo"])
def test_the_residual_add_after_a_class_token_concat_fuses(path):
    torch.manual_seed(0)
    module = ClassTokenBlock().eval()
    model = export_onnx(module, ARGS, path)
    optimized, report = optimize_checked(model)
    assert report.rule_counts.get("fuse_add_norm") == 1
    assert "LayerNormalization" not in op_types(optimized)
    (got,) = run_onnx(optimized, feeds_for(model, ARGS))
    np.testing.assert_allclose(got, float64_reference(module, ARGS)[0], rtol=1e-5, atol=1e-5)
