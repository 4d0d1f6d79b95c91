"""The three ways users export a model: both ``torch.onnx.export`` paths, and ``torch.export`` (.pt2)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from models.onnx_export import export_dynamo, export_torchscript

from .architectures import Architecture

PATHS = ("onnx_dynamo", "onnx_torchscript", "torch_export")
# TorchScript's exporter goes up to opset 17 for our ops (LayerNormalization needs 17).
TORCHSCRIPT_OPSET = 17


def export(architecture: Architecture, path: str, folder: Path) -> tuple[Path, float]:
    """Writes the model exported through ``path`` into ``folder``; returns the file and the seconds taken."""
    folder.mkdir(parents=True, exist_ok=True)
    module, args = architecture.module, architecture.args
    start = time.perf_counter()
    if path == "torch_export":
        target = folder / f"{path}.pt2"
        program = torch.export.export(module, args)
        torch.export.save(program, target)
    else:
        import onnx

        target = folder / f"{path}.onnx"
        if path == "onnx_dynamo":
            model = export_dynamo(module, args)
        else:
            names = [f"input_{i}" for i in range(len(args))]
            model = export_torchscript(module, args, input_names=names, opset=TORCHSCRIPT_OPSET)
        onnx.save(model, target)
    return target, time.perf_counter() - start
