"""One model, original and optimized, in eager PyTorch, torch.compile, ONNX Runtime's CUDA EP and graphopt's
two runtimes: start-to-finish and GPU time, speedup, HBM roofline, and agreement with eager."""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import graphopt
from graphopt.frontends.torch_export import user_input_names
from graphopt.runtime.program_calls import cuda_graphed, direct_callable, to_device

from .floors import measure_floors
from .ort_cuda import ort_cuda_callable
from .timing import copy_bandwidth_bytes_per_s, gpu_us, start_to_finish_us

log = logging.getLogger(__name__)

VERTICAL_PASSES = ("fuse_norm_act", "fuse_norm_act_linear", "fuse_batch_norm_act", "fuse_bias_act")


@dataclass
class Row:
    variant: str
    model: str  # "original", "batched" (horizontal fusion only) or "optimized"
    start_to_finish_us: float | None = None
    gpu_us: float | None = None
    max_abs_error: float | None = None
    error: str | None = None
    noise: float | None = None  # relative spread of the start-to-finish time (see rounds.py)
    extra: dict[str, Any] = field(default_factory=dict)


def user_inputs(program: torch.export.ExportedProgram, seed: int = 0) -> list[torch.Tensor]:
    """Random CUDA tensors shaped like the program's user inputs (symbolic dims from the example)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_input_names(program):
            continue
        value = node.meta["val"]
        shape = [int(d) if isinstance(d, int) else int(d.node.hint or 2) for d in value.shape]
        tensor = torch.randn(shape, generator=generator, dtype=torch.float32).to(value.dtype)
        tensors.append(tensor.cuda())
    return tensors


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def export_onnx(program: torch.export.ExportedProgram, inputs: list[torch.Tensor]):
    with _quiet():
        return torch.onnx.export(program, tuple(t.cpu() for t in inputs), dynamo=True).model_proto


def build_variants(
    program, inputs, *, compile_modes=("default", "reduce-overhead")
) -> list[tuple[str, str, Callable]]:
    """(variant, model, builder) triples; a builder returns a zero-argument call (built lazily: some fail)."""
    optimized_program, _ = graphopt.optimize(program)
    original_onnx = export_onnx(program, inputs)
    optimized_onnx, _ = graphopt.optimize(original_onnx)
    # Horizontal fusion alone (no fused kernels): what batching the per-slice chains buys by itself.
    horizontal_program, _ = graphopt.optimize(program, skip=VERTICAL_PASSES)
    horizontal_onnx, _ = graphopt.optimize(original_onnx, skip=VERTICAL_PASSES)
    horizontal_cuda = to_device(horizontal_program, "cuda")
    onnx_names = [i.name for i in original_onnx.graph.input]
    feeds = dict(zip(onnx_names, inputs, strict=True))
    original_cuda = to_device(program, "cuda")
    optimized_cuda = to_device(optimized_program, "cuda")

    def eager():
        module = original_cuda.module()
        return lambda: module(*inputs)

    def compiled(mode):
        def build():
            function = torch.compile(original_cuda.module(), mode=None if mode == "default" else mode)
            return lambda: function(*inputs)

        return build

    def graphopt_module():
        module = optimized_cuda.module()
        return lambda: module(*inputs)

    def direct(program_on_device):
        def build():
            function = direct_callable(program_on_device)
            return lambda: function(*inputs)

        return build

    def graphopt_graphed(capture_inputs):
        def build():
            function = cuda_graphed(direct_callable(optimized_cuda), inputs, capture_inputs=capture_inputs)
            return lambda: function(*inputs)

        return build

    def ort(model, cuda_graph, with_library, sync_in_ort=True):
        def build():
            call = ort_cuda_callable(
                model, feeds, cuda_graph=cuda_graph, with_library=with_library, sync_in_ort=sync_in_ort
            )
            return call if sync_in_ort else lambda: (call(), torch.cuda.synchronize())[0]

        return build

    variants = [("eager PyTorch", "original", eager)]
    variants += [(f"torch.compile ({m})", "original", compiled(m)) for m in compile_modes]
    variants += [
        ("ORT CUDA EP", "original", ort(original_onnx, False, False)),
        ("ORT CUDA EP + CUDA graph", "original", ort(original_onnx, True, False)),
        ("horizontal fusion only → torch (direct)", "batched", direct(horizontal_cuda)),
        ("horizontal fusion only → ORT CUDA EP", "batched", ort(horizontal_onnx, False, False)),
        ("graphopt → torch (ep.module())", "optimized", graphopt_module),
        ("graphopt → torch (direct)", "optimized", direct(optimized_cuda)),
        ("graphopt → torch + CUDA graph (copy in)", "optimized", graphopt_graphed(False)),
        ("graphopt → torch + CUDA graph (fixed buffers)", "optimized", graphopt_graphed(True)),
        ("graphopt → ORT CUDA EP", "optimized", ort(optimized_onnx, False, True)),
        ("graphopt → ORT CUDA EP + CUDA graph", "optimized", ort(optimized_onnx, True, True)),
        (
            "graphopt → ORT CUDA EP + CUDA graph, caller syncs",
            "optimized",
            ort(optimized_onnx, True, True, False),
        ),
    ]
    return variants


def run(
    program, *, iters: int = 200, warmup: int = 20, compile_modes=("default", "reduce-overhead")
) -> dict[str, Any]:
    # Inference, as a deployed model runs: no autograd bookkeeping (torch.compile's CUDA graphs need it
    # off, and custom ops skip their autograd layer).
    with torch.inference_mode():
        return _run(program, iters=iters, warmup=warmup, compile_modes=compile_modes)


def _run(program, *, iters: int, warmup: int, compile_modes) -> dict[str, Any]:
    inputs = user_inputs(program)
    bandwidth = copy_bandwidth_bytes_per_s()
    variants = build_variants(program, inputs, compile_modes=compile_modes)
    reference = None
    rows: list[Row] = []
    for variant, model, builder in variants:
        row = Row(variant, model)
        started = time.perf_counter()
        try:
            call = builder()
            output = _first(call())
            if reference is None:
                reference = output.detach().float().clone()
            row.max_abs_error = float((output.detach().float() - reference).abs().max())
            row.start_to_finish_us = start_to_finish_us(call, warmup=warmup, iters=iters)
            row.gpu_us = gpu_us(call)
        except Exception as error:  # a runtime that cannot run the model is a result, not a crash
            row.error = error_summary(error)
            log.warning("%s failed: %s", variant, row.error)
        row.extra["seconds_to_build_and_measure"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        log.info("%s: %s", variant, row)
    moved = sum(t.numel() * t.element_size() for t in inputs) + (
        reference.numel() * 4 if reference is not None else 0
    )
    weights = sum(t.numel() * t.element_size() for t in program.state_dict.values())
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "copy_bandwidth_TBps": round(bandwidth / 1e12, 3),
        "bytes_moved": moved + weights,
        "roofline_us": (moved + weights) / bandwidth * 1e6,
        "rows": [row.__dict__ for row in rows],
        "floors_us": measure_floors(iters=iters, warmup=warmup),
    }


def _first(output):
    while isinstance(output, tuple | list):
        output = output[0]
    return output


def error_summary(error: Exception) -> str:
    """One line for a runtime's failure: its type and first line of message, followed by the next line
    where the first only introduces it (torch.compile's "backend='inductor' raised:")."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(error).__name__}: {text}"[:300]
