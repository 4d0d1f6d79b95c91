"""What the numeric check does not see, checked on every row of the coverage run.

ONNX: the numeric check runs both models with ONNX Runtime's own optimizations off. Here the optimized
model must also load and compute the original's outputs with every ORT optimization on, both with
graphopt's op library registered and without it (its fused ops then run as their model-local
functions), and ORT's optimized graph of it must hold no more nodes than ORT's optimized graph of the
original, nor more of any one op (views excepted; tests/models/test_ort_sees_no_more_nodes.py).

torch.export: the optimized archive must load and run, hold every tensor its module reads as a
parameter or a buffer (so ``.to()`` moves it), and keep the original's number of parameter values, or
have the report say why not (a lookup of positions 0..T-1 folded into a parameter of T rows).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .record import error_line

VIEWS = {"Reshape"}
# ONNX Runtime's CPU runs convolutions and the elementwise ops between them in a blocked channel layout
# (NCHWc), and reorders a tensor into and out of it around any other op. A residual add folded into a
# fused norm leaves one reorder where ORT ran the add in the blocked layout: the same one pass over the
# tensor. Reorders may grow by as many elementwise adds and products as went away, no more.
REORDERS = {"com.microsoft.nchwc.ReorderInput", "com.microsoft.nchwc.ReorderOutput"}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Sum"}
# (one GEMM whether its bias rides in Gemm's epilogue or in the fused activation after a MatMul)
MATMULS = {"MatMul", "Gemm", "FusedMatMul", "FusedGemm"}
# (pieces of one tensor: slices joined into one Split are fewer nodes, not more work)
SLICES = {"Slice", "Split"}
# (of the outputs' scale: an absolute 1e-4 on outputs near 1, relative on larger ones; torchvision's
# Inception-v3 with its own initialization and no trained batch-norm statistics computes logits near 1e9)
TOLERANCE = 1e-4


def _tolerance(*expected) -> float:
    return TOLERANCE * max([1.0] + [float(np.max(np.abs(np.asarray(e)), initial=0.0)) for e in expected])


def check(original: Path, optimized: Path, args: tuple, notes: list[str]) -> dict[str, Any]:
    """{'ok': bool, 'problems': [...], ...}: the guard's figures for the row; ``notes``: the report's."""
    try:
        if original.suffix == ".onnx":
            return _onnx(original, optimized, args)
        return _torch(original, optimized, args, notes)
    except Exception as error:  # a guard that cannot even run is a finding of its own
        return {"ok": False, "problems": [error_line(error, 300)]}


def _session(path: Path, library: bool, folder: str | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if folder is not None:
        options.optimized_model_filepath = str(Path(folder) / f"{path.stem}.ort.onnx")
    if library:
        from graphopt.ort import library_path

        options.register_custom_ops_library(library_path())
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _ops(folder: str, path: Path) -> Counter:
    import onnx

    graph = onnx.load(str(Path(folder) / f"{path.stem}.ort.onnx")).graph
    return Counter(_family(n) for n in graph.node)


def _onnx(original: Path, optimized: Path, args: tuple) -> dict[str, Any]:
    problems = []
    with tempfile.TemporaryDirectory(prefix="coverage-") as folder:
        reference = _session(original, True, folder)
        feeds = {i.name: a.numpy() for i, a in zip(reference.get_inputs(), args, strict=True)}
        expected = reference.run(None, feeds)
        before = _ops(folder, original)
        for library in (True, False):
            session = _session(optimized, library, folder if library else None)
            got = session.run(None, feeds)
            error = max(float(np.max(np.abs(g - e), initial=0.0)) for g, e in zip(got, expected, strict=True))
            if not error <= _tolerance(*expected):
                problems.append(
                    f"ORT (all optimizations, library {'on' if library else 'off'}) differs by {error:.3g}"
                )
        after = _ops(folder, optimized)
    from graphopt.fused import DOMAIN

    # (graphopt's own ops are new by design: what they replace is counted on the original's side)
    grown = {
        op: (before[op], n)
        for op, n in after.items()
        if op not in VIEWS and not op.startswith(f"{DOMAIN}.") and n > before[op]
    }
    reordered = sum(after[op] - before[op] for op in REORDERS)
    elementwise_gone = sum(before[op] - after[op] for op in ELEMENTWISE)
    if 0 < reordered <= elementwise_gone:
        grown = {op: counts for op, counts in grown.items() if op not in REORDERS}
    if sum(after.values()) > sum(before.values()):
        problems.append(f"ORT's graph grows: {sum(before.values())} -> {sum(after.values())} nodes")
    if grown:
        problems.append(f"ORT runs more of {grown}")
    return {
        "ok": not problems,
        "problems": problems,
        "ort_nodes": [sum(before.values()), sum(after.values())],
    }


def _torch(original: Path, optimized: Path, args: tuple, notes: list[str]) -> dict[str, Any]:
    import torch

    import graphopt  # noqa: F401  (registers the fused ops the optimized program calls)

    problems = []
    before, after = torch.export.load(original).module(), torch.export.load(optimized).module()
    with torch.no_grad():
        expected, got = before(*args), after(*args)
    error = float((got - expected).abs().max())
    if not error <= _tolerance(expected.numpy()):
        problems.append(f"the loaded archive's module differs by {error:.3g}")
    counts = [sum(p.numel() for p in m.parameters()) for m in (before, after)]
    explained = any(" parameter values, the original " in n and not n.endswith(": ") for n in notes)
    if counts[0] != counts[1] and not explained:
        problems.append(f"parameter values {counts[0]} -> {counts[1]}, and the report does not say why")
    # (a constant the original holds outside its parameters and buffers, as torch.export lifts a tensor
    # the model made in forward, may stay so: the optimized program keeps the original's kinds)
    stray = [name for name in _stray_tensors(after) if name not in set(_stray_tensors(before))]
    if stray:
        problems.append(f"tensors held outside parameters and buffers: {stray[:3]}")
    return {"ok": not problems, "problems": problems, "parameters": counts}


def _stray_tensors(module) -> list[str]:
    """The tensors a module holds outside its parameters and buffers (``.to(device)`` leaves them)."""
    import torch

    registered = {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}
    return [
        f"{prefix}.{name}".lstrip(".")
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor) and id(value) not in registered
    ]


def _family(node) -> str:
    if node.op_type in MATMULS:
        return "MatMul|Gemm"
    if node.domain in ("", "ai.onnx") and node.op_type in SLICES:
        return "Slice|Split"
    return f"{node.domain}.{node.op_type}".lstrip(".")
