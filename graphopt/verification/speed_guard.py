"""The speed guard: the original and the optimized model timed on the device before anything is written.

Like the numeric check, it refuses a model that is worse: slower than the original beyond the noise
measured in the same run. Timing interleaves the two models in rounds (original, optimized, optimized,
original, ...), so a drift of the machine's speed (a neighbour's load, clocks) touches both alike; each
round gives a ratio optimized / original, the verdict reads the median ratio, and the noise is the factor
of half the spread between the ratios' quartiles, on a log scale, so that it reads alike for speed-ups
and slow-downs (at least ``MIN_NOISE``): slower means a median ratio above 1 + noise, faster one
below 1 / (1 + noise).

With ``keep_paying_passes`` a slower pipeline is not refused at once: passes that changed the graph are
dropped one at a time, latest first, keeping each drop that makes the model faster (in two timings), and
the model of the passes that paid is checked and written (if it is still slower, it is refused).
"""

from __future__ import annotations

import contextlib
import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput, VerificationError

log = logging.getLogger(__name__)

DEVICES = ("cpu", "cuda")
MIN_NOISE = 0.02  # (relative; run-to-run spread of a quiet machine is about this)
ROUNDS = 15
SAMPLE_SECONDS = 0.005  # each timed sample repeats the call this long, so timer resolution does not count


class SlowerModel(VerificationError):
    """The optimized model runs slower than the original, beyond measured noise."""


@dataclass
class SpeedCheck:
    device: str
    runtime: str
    original_us: float
    optimized_us: float
    ratio: float  # median over rounds of optimized / original time
    noise: float
    rounds: int

    @property
    def slower(self) -> bool:
        return self.ratio > 1 + self.noise

    @property
    def faster(self) -> bool:
        return self.ratio < 1 / (1 + self.noise)

    def summary(self) -> str:
        return (
            f"{self.runtime} on {self.device}: optimized {self.optimized_us:,.1f} µs, original "
            f"{self.original_us:,.1f} µs per call ({self.ratio:.3f}x the original's time, noise "
            f"±{self.noise:.1%}, {self.rounds} interleaved rounds)"
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "slower": self.slower, "faster": self.faster, "summary": self.summary()}


def check_device(device: str) -> None:
    if device not in DEVICES:
        raise BadInput(f"--measure {device!r}: expected one of {', '.join(DEVICES)}")


def measure(
    original: Any,
    optimized: Any,
    feeds: dict[str, np.ndarray],
    device: str,
    *,
    base_dir: Path | None = None,
    rounds: int = ROUNDS,
) -> SpeedCheck:
    """Times the two models (both ONNX, or both ExportedPrograms) on ``device``, interleaved."""
    check_device(device)
    runtime, make = _runner(original, device)
    calls = [make(original, feeds, base_dir), make(optimized, feeds, base_dir)]
    repeats = [_repeats(call) for call in calls]
    samples: list[list[float]] = [[], []]
    for round_index in range(rounds):
        order = (0, 1) if round_index % 2 == 0 else (1, 0)
        for which in order:
            samples[which].append(_time(calls[which], repeats[which]))
    logs = [math.log(b / a) for a, b in zip(*samples, strict=True)]
    quartiles = statistics.quantiles(logs, n=4) if len(logs) > 1 else [logs[0]] * 3
    return SpeedCheck(
        device=device,
        runtime=runtime,
        original_us=statistics.median(samples[0]) * 1e6,
        optimized_us=statistics.median(samples[1]) * 1e6,
        ratio=math.exp(statistics.median(logs)),
        noise=max(MIN_NOISE, math.exp((quartiles[2] - quartiles[0]) / 2) - 1),
        rounds=rounds,
    )


def _repeats(call: Callable[[], None]) -> int:
    for _ in range(3):
        call()
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(1000, round(SAMPLE_SECONDS / once)))


def _time(call: Callable[[], None], repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def _runner(model: Any, device: str):
    import onnx

    where = "CUDA" if device == "cuda" else "CPU"
    if isinstance(model, onnx.ModelProto | str | Path):
        return f"ONNX Runtime {where} EP", _onnx_cuda_call if device == "cuda" else _onnx_cpu_call
    return f"PyTorch eager ({where})", _torch_call(device)


def _onnx_cpu_call(model, feeds, base_dir):
    from ..runtime.runners import onnx_session

    session = onnx_session(model, base_dir)  # (every ONNX Runtime optimization on, as users run it)
    wanted = {i.name for i in session.get_inputs()}
    feed = {k: v for k, v in feeds.items() if k in wanted}

    def call():
        session.run(None, feed)

    return call


def _torch_call(device: str):
    def make(program, feeds, base_dir):
        import torch

        from ..frontends.torch_arrays import to_torch
        from ..frontends.torch_export import call_arguments

        if device == "cuda":
            if not torch.cuda.is_available():
                raise BadInput("--measure cuda: PyTorch finds no CUDA device here")
            from ..runtime.program_calls import to_device

            program = to_device(program, "cuda")
        tensors = {name: to_torch(array).to(device) for name, array in feeds.items()}
        args, kwargs = call_arguments(program, tensors)
        module = program.module()

        def call():
            with torch.no_grad():
                module(*args, **kwargs)
            if device == "cuda":
                torch.cuda.synchronize()

        return call

    return make


def _onnx_cuda_call(model, feeds, base_dir):
    """ONNX Runtime's CUDA EP with inputs and outputs bound on the device, so a call times the run."""
    import onnxruntime as ort

    from ..ort import library_path

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise BadInput("--measure cuda: this onnxruntime has no CUDA execution provider (onnxruntime-gpu)")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    with contextlib.suppress(ImportError, FileNotFoundError, OSError):  # (fused ops then run as functions)
        options.register_custom_ops_library(library_path())
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    session = ort.InferenceSession(source, options, providers=["CUDAExecutionProvider"])
    binding = session.io_binding()
    wanted = {i.name for i in session.get_inputs()}
    for name, array in feeds.items():
        if name in wanted:
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, "cuda", 0))
    for output in session.get_outputs():
        binding.bind_output(output.name, "cuda")
    return lambda: session.run_with_iobinding(binding)


def guard(
    check: SpeedCheck,
    rebuild: Callable[[Sequence[str]], Any] | None,
    changed_passes: Sequence[str],
    time_against: Callable[[Any, Any], SpeedCheck],
    optimized: Any,
) -> tuple[Any, SpeedCheck, list[str]]:
    """What to keep: ``optimized`` if it is not slower; with ``rebuild`` (keep the passes that paid),
    the model built without the passes whose removal made it faster. Returns the model, its speed check
    against the original and the passes dropped; raises SlowerModel for a model still slower."""
    dropped: list[str] = []
    if check.slower and rebuild is not None:
        current = optimized
        for name in reversed(changed_passes):
            candidate = rebuild([*dropped, name])
            versus = time_against(current, candidate)
            log.info("without %s: %s", name, versus.summary())
            # A drop must be faster twice, timed apart: one timing's noise estimate can miss a burst
            # of load on a shared machine, and a pass dropped so would be lost for nothing.
            if not versus.faster:
                continue
            again = time_against(current, candidate)
            log.info("without %s, again: %s", name, again.summary())
            if not again.faster:
                continue
            dropped.append(name)
            current = candidate
            check = time_against(None, current)
            if not check.slower:
                break
        optimized = current
    if check.slower:
        without = f" (even without {', '.join(dropped)})" if dropped else ""
        raise SlowerModel(f"the optimized model is slower{without}: {check.summary()}")
    return optimized, check, dropped
