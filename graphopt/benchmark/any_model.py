"""Any model, original and optimized, in every runtime this machine has: ONNX Runtime (CUDA EP with and
without a CUDA graph, or the CPU EP), ONNX Runtime's transformer optimizer alone and composed with
graphopt in both orders, eager PyTorch, torch.compile and graphopt through PyTorch.

A row that cannot run here (no GPU, no PyTorch program for an ONNX file, a runtime that fails on the
model) is kept with the reason, so one table says what was measured and what was not. Start-to-finish
is one call and a synchronize; all rows are timed together in interleaved rounds, and each gets the
median over rounds and a noise figure (rounds.py). ONNX Runtime on CUDA reads and writes device-resident
buffers through I/O binding (no host copy per call). GPU time comes from the profiler (CUDA only); the error
is the largest absolute difference of the first output from the first row that ran (the original).
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import graphopt

from .compare import Row

log = logging.getLogger(__name__)

ROUNDS = 9  # interleaved timing rounds of ``graphopt bench`` (see rounds.py)
Builder = Callable[[], Callable[[], Any]]  # builds a call; the call runs the model once, returns outputs


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def ort_transformer_optimized(model, model_type: str, use_gpu: bool, options: dict | None = None):
    """ONNX Runtime's transformer optimizer on ``model`` (ModelProto)."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # (it rewrites the model it is given)
    with _quiet():
        optimized = optimize_model(
            copy, model_type=model_type, opt_level=0, use_gpu=use_gpu, **(options or {})
        )
    model = optimized.model
    # (its contrib ops are written without their domain's opset import, which a checker refuses)
    imported = {o.domain for o in model.opset_import}
    for domain in sorted({n.domain for n in model.graph.node} - imported - {"", "ai.onnx"}):
        model.opset_import.add(domain=domain, version=1)
    return model


def _ort_call(model, feeds: dict[str, np.ndarray], device: str, cuda_graph: bool) -> Callable[[], Any]:
    declared = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    feeds = {k: v for k, v in feeds.items() if k in declared}
    if device == "cuda":
        import torch

        from .ort_cuda import ort_cuda_callable

        tensors = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
        call = ort_cuda_callable(model, tensors, cuda_graph=cuda_graph, with_library=True)
        return lambda: call()
    from graphopt.runtime.runners import onnx_session

    session = onnx_session(model)
    wanted = {i.name for i in session.get_inputs()}
    feed = {k: v for k, v in feeds.items() if k in wanted}
    return lambda: session.run(None, feed)


def _torch_call(
    program,
    feeds,
    device: str,
    compile_mode: str | None = None,
    direct: bool = False,
    graphed: bool = False,
    no_grad: bool = False,
):
    import torch

    from graphopt.frontends.torch_arrays import to_torch
    from graphopt.frontends.torch_export import call_arguments

    if device == "cuda":
        from graphopt.runtime.program_calls import to_device

        program = to_device(program, "cuda")
    tensors = {name: to_torch(array).to(device) for name, array in feeds.items()}
    args, kwargs = call_arguments(program, tensors)
    if direct or graphed:
        from graphopt.runtime.program_calls import cuda_graphed, direct_callable

        function = direct_callable(program)
        if graphed:
            function = cuda_graphed(function, list(args), capture_inputs=True)
        return lambda: function(*args, **kwargs)
    module = program.module()
    if compile_mode is not None:
        module = torch.compile(module, mode=None if compile_mode == "default" else compile_mode)
    if no_grad:

        def inference():
            with torch.no_grad():
                return module(*args, **kwargs)

        return inference
    return lambda: module(*args, **kwargs)


def variants(
    onnx_model,
    program,
    feeds: dict[str, np.ndarray],
    device: str,
    *,
    compile_modes=("default",),
    ort_model_type: str | None = None,
    ort_options: dict | None = None,
) -> list[tuple[str, str, Builder | str]]:
    """(row, model, builder or the reason it cannot run) for every runtime and model form."""
    on_gpu = device == "cuda"
    ep = "ORT CUDA EP" if on_gpu else "ORT CPU EP"
    rows: list[tuple[str, str, Builder | str]] = []
    if onnx_model is None:
        rows.append((ep, "original", "no ONNX model (give an .onnx file, or export the program)"))
    else:
        optimized = _lazy(lambda: graphopt.optimize(onnx_model, verify=False).model)
        graphs = [False, True] if on_gpu else [False]
        for graphed in graphs:
            suffix = " + CUDA graph" if graphed else ""
            rows.append((ep + suffix, "original", _builder(lambda g=graphed: (onnx_model, g), feeds, device)))
            rows.append(
                (
                    f"graphopt → {ep}{suffix}",
                    "optimized",
                    _builder(lambda g=graphed: (optimized(), g), feeds, device),
                )
            )
        if ort_model_type is None:
            reason = "ORT's transformer optimizer needs a model type (--ort-model-type bert|gpt2|vit|t5|...)"
            for name in ("ORT transformer optimizer", "ORT optimizer → graphopt", "graphopt → ORT optimizer"):
                rows.append((f"{name} → {ep}", "ort-optimized", reason))
        else:
            ort_first = _lazy(
                lambda: ort_transformer_optimized(onnx_model, ort_model_type, on_gpu, ort_options)
            )
            ort_then_graphopt = _lazy(lambda: graphopt.optimize(ort_first(), verify=False).model)
            graphopt_then_ort = _lazy(
                lambda: ort_transformer_optimized(optimized(), ort_model_type, on_gpu, ort_options)
            )
            for name, build in (
                ("ORT transformer optimizer", ort_first),
                ("ORT optimizer → graphopt", ort_then_graphopt),
                ("graphopt → ORT optimizer", graphopt_then_ort),
            ):
                rows.append(
                    (f"{name} → {ep}", "ort-optimized", _builder(lambda b=build: (b(), False), feeds, device))
                )
    if program is None:
        reason = "no PyTorch program (give a .pt2 archive)"
        rows += [("eager PyTorch", "original", reason), ("graphopt → PyTorch", "optimized", reason)]
        return rows
    torch_optimized = _lazy(lambda: graphopt.optimize(program, verify=False).model)
    # Each way of calling a program, for the original and for graphopt's output alike, so every
    # graphopt row has the original's row of the same call to be compared with: as is (grad mode:
    # an exported program's parameters require gradients), under no_grad (inference code), compiled,
    # its graph module called directly, and replayed from a CUDA graph (what a host-bound model
    # deploys with).
    for name, model, get in (
        ("eager PyTorch", "original", lambda: program),
        ("graphopt → PyTorch", "optimized", torch_optimized),
    ):
        compiled_name = "torch.compile" if model == "original" else "graphopt → torch.compile"
        rows.append((name, model, lambda g=get: _torch_call(g(), feeds, device)))
        rows.append((f"{name} (no_grad)", model, lambda g=get: _torch_call(g(), feeds, device, no_grad=True)))
        for mode in compile_modes:  # (compiled the same way for both: moved, then .module())
            rows.append(
                (f"{compiled_name} ({mode})", model, lambda g=get, m=mode: _torch_call(g(), feeds, device, m))
            )
        rows.append((f"{name} (direct)", model, lambda g=get: _torch_call(g(), feeds, device, direct=True)))
        if on_gpu:
            rows.append(
                (f"{name} + CUDA graph", model, lambda g=get: _torch_call(g(), feeds, device, graphed=True))
            )
    return rows


def _builder(model_and_graph: Callable[[], tuple[Any, bool]], feeds, device) -> Builder:
    def build():
        model, graphed = model_and_graph()
        return _ort_call(model, feeds, device, graphed)

    return build


def _lazy(make: Callable[[], Any]) -> Callable[[], Any]:
    """``make`` run once, on first call (a failing optimizer fails only the rows that need it)."""
    cache: list[Any] = []

    def get():
        if not cache:
            cache.append(make())
        return cache[0]

    return get


def run_rows(rows, device: str, *, rounds: int = 11, block: int = 20, warmup: int = 10) -> list[Row]:
    """Builds every row, checks its output against the first, then times all of them together in
    interleaved rounds (``rounds`` × ``block`` calls each, see ``rounds.interleaved_us``)."""
    reference = None
    results, calls = [], []
    for variant, model, builder in rows:
        row = Row(variant, model)
        results.append(row)
        if isinstance(builder, str):
            row.error = f"skipped: {builder}"
            continue
        started = time.perf_counter()
        try:
            with _quiet():
                call = builder()
                output = _first_array(call())
                for _ in range(warmup):  # (compilation, autotuning, arenas: before any timing)
                    call()
            if reference is None:
                reference = output
            row.max_abs_error = (
                float(np.max(np.abs(output - reference))) if output.shape == reference.shape else None
            )
            calls.append((row, call))
        except Exception as error:  # a runtime that cannot run the model is a result, not a crash
            row.error = _short(error)
            log.warning("%s failed: %s", variant, row.error)
            log.info("%s failed in full:\n%s", variant, "".join(traceback.format_exception(error))[:6000])
        row.extra["seconds_to_build"] = round(time.perf_counter() - started, 1)
    _time_together(calls, device, rounds, block)
    for row in results:
        log.info("%s: %s", row.variant, row)
    return results


def _time_together(calls, device: str, rounds: int, block: int) -> None:
    from .rounds import interleaved_us

    synchronize = None
    if device == "cuda":
        import torch

        synchronize = torch.cuda.synchronize
    try:
        with _quiet():
            timings = interleaved_us(
                [c for _, c in calls], rounds=rounds, block=block, warmup=3, synchronize=synchronize
            )
    except Exception as error:  # (every call ran before; one failing now fails the comparison)
        for row, _ in calls:
            row.error = _short(error)
        return
    for (row, call), timing in zip(calls, timings, strict=True):
        row.start_to_finish_us = timing.median_us
        row.noise = timing.noise
        row.extra.update(rounds=timing.rounds, calls_per_round=timing.calls_per_round)
        if device == "cuda":
            from .timing import gpu_us

            try:
                row.gpu_us = gpu_us(call)
            except Exception as error:  # (the profiler, not the model: keep the time)
                log.warning("%s: no GPU time: %s", row.variant, _short(error))


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def _first_array(output) -> np.ndarray:
    while isinstance(output, tuple | list):
        output = output[0]
    if hasattr(output, "detach"):
        output = output.detach().float().cpu().numpy()
    return np.asarray(output, dtype=np.float64)


def bench(
    model_path,
    *,
    device: str,
    input_shapes=None,
    dtype: str | None = None,
    iters: int = 100,
    compile_modes=("default",),
    ort_model_type: str | None = None,
) -> dict[str, Any]:
    """The benchmark of one model file (.onnx or .pt2) on ``device``: JSON-ready."""
    import datetime
    from pathlib import Path

    from graphopt.errors import BadInput

    from .inputs import model_feeds

    path = Path(model_path)
    onnx_model = program = None
    if path.suffix == ".pt2":
        from graphopt.frontends.torch_export import load_pt2

        program = load_pt2(path)
        if dtype is not None:
            program = _cast_program(program, dtype, input_shapes)
    else:
        import onnx

        from graphopt.frontends.onnx_read import read_onnx

        read_onnx(path)  # (its checks first: a damaged file, external data that is not the model's own)
        onnx_model = onnx.load(path)
        if dtype is not None:
            raise BadInput(
                f"--dtype {dtype}: an ONNX model runs in the dtype it was exported in; export it in "
                "that dtype (or give the .pt2 archive, which graphopt bench casts)"
            )
    feeds = model_feeds(program if program is not None else path, input_shapes)
    if program is not None and onnx_model is None:
        onnx_model = _export_onnx(program, feeds)
    rows = variants(
        onnx_model, program, feeds, device, compile_modes=compile_modes, ort_model_type=ort_model_type
    )
    rounds = min(ROUNDS, max(1, iters))  # (``iters`` timed calls per row, spread over the rounds)
    result_rows = run_rows(rows, device, rounds=rounds, block=-(-iters // rounds))
    return {
        "model": path.name,
        "device": _device_name(device),
        "date": datetime.date.today().isoformat(),
        "dtype": dtype,
        "inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in feeds.items()},
        "rows": [r.__dict__ for r in result_rows],
    }


def _cast_program(program, dtype: str, input_shapes):
    import torch

    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    from graphopt.frontends.torch_arrays import to_torch
    from graphopt.frontends.torch_export import call_arguments

    from .inputs import model_feeds

    module = program.module().to(torch_dtype)
    feeds = model_feeds(program, input_shapes)
    tensors = {
        k: to_torch(v).to(torch_dtype) if np.issubdtype(v.dtype, np.floating) else to_torch(v)
        for k, v in feeds.items()
    }
    args, kwargs = call_arguments(program, tensors)
    with _quiet():
        return torch.export.export(module, tuple(args), kwargs)


def _export_onnx(program, feeds):
    """The ONNX model of a program (the dynamo exporter), for the ONNX Runtime rows; None if it fails."""
    import torch

    from graphopt.frontends.torch_arrays import to_torch
    from graphopt.frontends.torch_export import call_arguments

    args, kwargs = call_arguments(program, {k: to_torch(v) for k, v in feeds.items()})
    try:
        with _quiet():
            return torch.onnx.export(program, tuple(args), kwargs=kwargs, dynamo=True).model_proto
    except Exception as error:
        log.warning("the ONNX export failed: %s", error)
        return None


def _device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    import platform

    return f"CPU ({platform.processor() or platform.machine()})"
