"""Optimizing an optimized model writes the same bytes: no node renamed again (``…/gelu/gelu``), no
value declared twice, no constant renamed back and forth."""

from pathlib import Path

import onnx
import pytest
import torch
from test_cli_optimize import gelu_formula_model

import graphopt
from models import zoo

MODELS = Path(__file__).resolve().parents[2] / "models"


def bundled(name):
    return lambda folder: MODELS / name


def from_zoo(name):
    def save(folder):
        entry = zoo.get(name)
        if entry.kind == "onnx":
            onnx.save(entry.build(), folder / f"{name}.onnx")
            return folder / f"{name}.onnx"
        torch.export.save(entry.build(), folder / f"{name}.pt2")
        return folder / f"{name}.pt2"

    return save


def gelu_formula(folder):
    """GELU written as its formula (opset 17 has no Gelu op): recognized, and written as the formula."""
    onnx.save(gelu_formula_model(17), folder / "gelu.onnx")
    return folder / "gelu.onnx"


SOURCES = {
    "split_stack.onnx": bundled("split_stack.onnx"),
    "split_stack.pt2": bundled("split_stack.pt2"),
    "mlp.onnx": bundled("mlp.onnx"),
    "gelu_formula": gelu_formula,
    "split_cat_uneven.dynamo": from_zoo("split_cat_uneven.dynamo"),
    "mlp_ln_gelu.export_decomposed": from_zoo("mlp_ln_gelu.export_decomposed"),
    "transformer_encoder.dynamo": from_zoo("transformer_encoder.dynamo"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_optimizing_again_writes_the_same_bytes(name, tmp_path):
    source = SOURCES[name](tmp_path)
    once, twice = tmp_path / f"once{source.suffix}", tmp_path / f"twice{source.suffix}"
    graphopt.optimize(source, output=once, verify=False)
    graphopt.optimize(once, output=twice, verify=False)
    assert twice.read_bytes() == once.read_bytes()
    if source.suffix == ".onnx":
        declared = [info.name for info in onnx.load(str(twice)).graph.value_info]
        assert len(declared) == len(set(declared))
