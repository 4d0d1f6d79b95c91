"""Exporting small modules the way users do, for tests: both torch.onnx.export paths."""

from __future__ import annotations

import numpy as np
import onnx
import torch

import graphopt
from models.onnx_export import export_dynamo, export_torchscript

ONNX_PATHS = ("torchscript", "dynamo")
TORCH_FORMS = ("exported", "decomposed")


def export_onnx(
    module: torch.nn.Module, args: tuple, path: str, opset: int = 18, dynamic_shapes=None
) -> onnx.ModelProto:
    """Exports through one of torch.onnx.export's two paths (``dynamic_shapes``: dims per input that vary)."""
    module = module.eval()
    if path == "dynamo":
        dynamic = None
        if dynamic_shapes is not None:
            dynamic = tuple({dim: torch.export.Dim.DYNAMIC for dim in spec} for spec in dynamic_shapes)
        return export_dynamo(module, args, opset=opset, dynamic_shapes=dynamic)
    names = [f"input_{i}" for i in range(len(args))]
    dynamic_axes = None
    if dynamic_shapes is not None:
        dynamic_axes = {
            name: {dim: "batch" for dim in spec} for name, spec in zip(names, dynamic_shapes, strict=True)
        }
    return export_torchscript(
        module, args, input_names=names, output_names=[], opset=min(opset, 17), dynamic_axes=dynamic_axes
    )


def op_types(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def optimize_checked(model, **options):
    """Optimizes with the numeric check on (it raises on a mismatch) and returns (model, report)."""
    optimized, report = graphopt.optimize(model, check_each_pass=True, **options)
    assert report.verification["ok"], report.verification["summary"]
    return optimized, report


def run_onnx(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from graphopt.runtime.runners import run_onnx as run

    return run(model, feeds)[1]


def float64_reference(module: torch.nn.Module, args: tuple) -> list[np.ndarray]:
    reference = _to_double(module)
    with torch.no_grad():
        out = reference(*(a.double() if a.is_floating_point() else a for a in args))
    outs = out if isinstance(out, tuple | list) else (out,)
    return [o.numpy() for o in outs]


def _to_double(module: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(module).double().eval()


def feeds_for(model: onnx.ModelProto, args: tuple) -> dict[str, np.ndarray]:
    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    return {name: a.numpy() for name, a in zip(inputs, args, strict=True)}


def rule_counts(report) -> dict[str, int]:
    return report.rule_counts


def near_misses(report, rule: str) -> list[str]:
    return [m.reason for p in report.passes for m in p.near_misses if m.rule == rule]


def export_torch(module: torch.nn.Module, args: tuple, form: str) -> torch.export.ExportedProgram:
    """torch.export's program of ``module``, as exported or (form "decomposed") after run_decompositions()."""
    program = torch.export.export(module.eval(), args)
    return program.run_decompositions() if form == "decomposed" else program


def call_targets(program: torch.export.ExportedProgram) -> list[str]:
    return [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
