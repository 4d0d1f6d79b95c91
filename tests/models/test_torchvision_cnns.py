"""torchvision's CNNs through torch.export (random weights, eval mode, 1x3x64x64): every inference batch
norm folds into its conv, and the in-place activations, residual adds and dropouts are read as
functional ops.
The ONNX path (whose exporters fold batch norms themselves) still optimizes the same models."""

from collections import Counter

import pytest
import torch

import graphopt
from graphopt.frontends.torch_export import from_exported_program

# model -> batch norms in the exported program (all after a conv)
MODELS = {"resnet18": 20, "mobilenet_v3_small": 34, "efficientnet_b0": 49}


def _models():
    try:
        import torchvision
    except Exception as error:  # (a torchvision built for another torch fails while importing)
        pytest.skip(f"torchvision does not import here: {error}")
    return torchvision.models


def _calls(program) -> Counter:
    return Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def _build(name: str):
    torch.manual_seed(0)
    module = getattr(_models(), name)(weights=None).eval()
    return module, (torch.randn(1, 3, 64, 64),)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_every_batch_norm_folds_into_its_conv(name):
    module, args = _build(name)
    program = torch.export.export(module, args)
    optimized, report = graphopt.optimize(program)
    assert report.verification["ok"], report.verification["summary"]
    before, after = _calls(program), _calls(optimized)
    assert sum(n for op, n in before.items() if "batch_norm" in op) == MODELS[name]
    assert report.rule_counts["fold_batch_norm_into_conv"] == MODELS[name]
    assert not [op for op in after if "batch_norm" in op], after
    ops = Counter(node.op for node in from_exported_program(program))
    in_place = [op for op in ops if op.split(".")[0].endswith("_")]
    assert not in_place, ops
    with torch.no_grad():
        expected, got = module(*args), optimized.module()(*args)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5 * float(expected.abs().max()))


@pytest.mark.slow
def test_onnx_path_still_optimizes_resnet18():
    from exporting import export_onnx, op_types

    module, args = _build("resnet18")
    model = export_onnx(module, args, "dynamo")
    assert "BatchNormalization" not in op_types(model)
    _, report = graphopt.optimize(model)
    assert report.verification["ok"], report.verification["summary"]
