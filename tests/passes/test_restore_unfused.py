"""Recognized ops that no fusion consumes go back out as the model had them (restore_unfused)."""

import math

import numpy as np
import pytest
import torch
from exporting import float64_reference
from torch import nn

import graphopt
from models.onnx_export import export_dynamo, export_torchscript

EXPORTERS = {
    "dynamo": export_dynamo,
    "torchscript": lambda module, args: export_torchscript(module, args, input_names=["x"]),
}


class LinearGeluTanh(nn.Module):
    """GPT-2's MLP: GELU's tanh formula after a matmul, where no norm precedes it to fuse with."""

    def __init__(self, d=32):
        super().__init__()
        self.up, self.down = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        h = self.up(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return self.down(h)


class SpelledOutNorm(nn.Module):
    """A layer norm written in reductions, with scale and bias, read by a matmul (nothing to fuse)."""

    def __init__(self, d=32):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(d))
        self.bias = nn.Parameter(0.2 * torch.randn(d))
        self.out = nn.Linear(d, d)

    def forward(self, x):
        centered = x - x.mean(-1, keepdim=True)
        normed = centered / torch.sqrt((centered * centered).mean(-1, keepdim=True) + 1e-5)
        return self.out(normed * self.weight + self.bias)


class NormThenGelu(nn.Module):
    """The tanh formula right after a LayerNorm: recognized, then fused."""

    def __init__(self, d=32):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = self.norm(x)
        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))


# (fuse_bias_act takes LinearGeluTanh's bias add and GELU: these tests look at what no fusion consumes)
NO_BIAS_FUSION = ["fuse_bias_act"]


def ops(model):
    return [(n.domain, n.op_type) for n in model.graph.node]


def computed(model):
    return sorted((domain, op) for domain, op in ops(model) if op != "Constant")


def _args():
    return (torch.randn(4, 8, 32, generator=torch.Generator().manual_seed(0)),)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("module_class", [LinearGeluTanh, SpelledOutNorm])
def test_unfused_recognitions_are_written_back_verbatim_in_onnx(exporter, module_class):
    torch.manual_seed(0)
    model = EXPORTERS[exporter](module_class().eval(), _args())
    optimized, report = graphopt.optimize(model, skip=NO_BIAS_FUSION)
    assert report.verification["ok"]
    recognized = sum(p.changed for p in report.passes if p.name.startswith("recognize_"))
    assert recognized >= 1
    restored = next(p for p in report.passes if p.name == "restore_unfused")
    assert restored.changed >= 1
    # (constant axes become attributes and equal constants merge: canonical forms of the same nodes)
    assert computed(optimized) == computed(model)
    if module_class is LinearGeluTanh:
        originals = {n.name: n for n in model.graph.node}
        written = [n for n in optimized.graph.node if n.op_type != "Constant"]
        assert all(node == originals[node.name] for node in written)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_recognition_that_a_fusion_consumes_is_not_given_back(exporter):
    model = EXPORTERS[exporter](NormThenGelu().eval(), _args())
    optimized, report = graphopt.optimize(model)
    assert report.verification["ok"]
    assert ops(optimized) == [("graphopt", "NormAct")]
    assert next(p for p in report.passes if p.name == "restore_unfused").changed == 0


def test_without_the_restore_the_onnx_model_carries_a_new_decomposition():
    model = EXPORTERS["torchscript"](LinearGeluTanh().eval(), _args())
    optimized, _ = graphopt.optimize(model, skip=["restore_unfused", *NO_BIAS_FUSION])
    assert computed(optimized) != computed(model)


@pytest.mark.parametrize("form", ["exported", "decomposed"])
@pytest.mark.parametrize("module_class", [LinearGeluTanh, SpelledOutNorm])
def test_unfused_recognitions_are_written_back_verbatim_in_torch(form, module_class):
    torch.manual_seed(0)
    module, args = module_class().eval(), _args()
    program = torch.export.export(module, args)
    if form == "decomposed":
        program = program.run_decompositions()
    optimized, report = graphopt.optimize(program, skip=NO_BIAS_FUSION)
    assert report.verification["ok"]
    assert next(p for p in report.passes if p.name == "restore_unfused").changed >= 1

    def calls(p):
        return [(n.name, str(n.target)) for n in p.graph.nodes if n.op == "call_function"]

    assert calls(optimized) == calls(program)
    (expected,) = float64_reference(module, args)
    np.testing.assert_allclose(optimized.module()(*args).detach().numpy(), expected, rtol=1e-5, atol=1e-5)
