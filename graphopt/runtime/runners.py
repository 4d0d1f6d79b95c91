"""Running a model on concrete inputs: ONNX models in ONNX Runtime, ExportedPrograms in torch."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

log = logging.getLogger(__name__)


def onnx_session(model: onnx.ModelProto | str | Path, source_dir: Path | None = None, *, exact: bool = False):
    """An InferenceSession on the CPU, with graphopt's op library registered when it is built.

    ``exact`` turns ONNX Runtime's own graph optimizations off, so the session computes what the model
    says: its fusions change numerics (a spelled-out float64 RMS norm loses precision when fused),
    which would blur a comparison of two models.
    """
    from ..dependencies import require

    ort = require("onnxruntime", "running an ONNX model (the numeric check, verify, bench)")
    options = ort.SessionOptions()
    options.log_severity_level = 4  # (errors come back as exceptions; its log lines would repeat them)
    if exact:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with contextlib.suppress(ImportError, FileNotFoundError, OSError):
        from ..ort import library_path

        options.register_custom_ops_library(library_path())
    if isinstance(model, onnx.ModelProto):
        from ..backends.onnx_write import needs_external_data, save_onnx

        if needs_external_data(model):
            # External weights are found relative to a file: write the model where ORT can read it.
            with tempfile.TemporaryDirectory(prefix="graphopt-") as folder:
                path = save_onnx(model, Path(folder) / "model.onnx", source_dir=source_dir)
                return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def run_onnx(
    model: onnx.ModelProto | str | Path,
    feeds: dict[str, np.ndarray],
    source_dir: Path | None = None,
    *,
    exact: bool = False,
) -> tuple[list[str], list[Any]]:
    names, (outputs,) = run_onnx_many(model, [feeds], source_dir, exact=exact)
    return names, outputs


def run_onnx_many(
    model: onnx.ModelProto | str | Path,
    draws: Sequence[dict[str, np.ndarray]],
    source_dir: Path | None = None,
    *,
    exact: bool = False,
) -> tuple[list[str], list[list[Any]]]:
    """(output names, the outputs of each set of feeds), all from one session."""
    session = onnx_session(model, source_dir, exact=exact)
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    return names, [session.run(None, {k: v for k, v in feeds.items() if k in wanted}) for feeds in draws]


def run_program(program, feeds: dict[str, np.ndarray]) -> tuple[list[str], list[Any]]:
    """Runs an ExportedProgram on its user inputs (given by placeholder name)."""
    names, (outputs,) = run_program_many(program, [feeds])
    return names, outputs


def run_program_many(program, draws: Sequence[dict[str, np.ndarray]]) -> tuple[list[str], list[list[Any]]]:
    """(output names, the outputs of each set of feeds); bfloat16 outputs come back as ml_dtypes
    bfloat16 arrays, so that they are compared with bfloat16's tolerance."""
    import torch

    from ..frontends.torch_state import mutated_targets, runnable_module

    # Built once (building costs more than running a small program), on copies of the buffers the
    # program writes, so the program is left as it was; each run starts from those buffers as they
    # were, as a single run would.
    module = runnable_module(program)
    written = {target: _state(module, target) for target in mutated_targets(program)}
    initial = {target: tensor.detach().clone() for target, tensor in written.items()}
    results = []
    for feeds in draws:
        results.append(_run_module(program, module, feeds))
        with torch.no_grad():
            for target, tensor in written.items():
                tensor.copy_(initial[target])
    names = [f"output_{i}" for i in range(len(results[0]))] if results else []
    return names, results


def _state(module, target: str):
    owner, _, leaf = target.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, leaf)


def _run_module(program, module, feeds: dict[str, np.ndarray]) -> list[Any]:
    import torch

    from ..frontends.torch_arrays import to_numpy, to_torch
    from ..frontends.torch_export import call_arguments

    tensors = {name: to_torch(array) for name, array in feeds.items()}
    args, kwargs = call_arguments(program, tensors)
    with torch.no_grad():
        outputs = module(*args, **kwargs)
    return [to_numpy(o) for o in torch.utils._pytree.tree_leaves(outputs)]
