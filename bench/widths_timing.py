"""Timing for bench/bench_widths.py: the device time of one call with its launch cost left out, and
the copies of the same bytes that a cell is judged against.

On a GPU a set of calls on distinct inputs is captured in one CUDA graph and replayed; per-call time =
replay time / calls (a sleep kernel queued first keeps the GPU busy while the host submits the replay,
so the events bracket device work only). Where capture fails (an ONNX Runtime session that does
something a graph cannot hold), the per-call kernel time comes from the CUDA profiler (CUPTI) instead;
each measurement names its method. Without a GPU (``--check``) calls are timed by the wall clock: the
numbers then only show that the script's logic runs.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Call = Callable[[], object]
MIN_CALLS = 20  # the reference method: 20 calls on 20 distinct inputs per graph
MAX_SETS = 400  # distinct input sets at most (tiny cells), so a graph stays a few hundred launches


@dataclass(frozen=True)
class Plan:
    """How many distinct buffer sets a cell allocates and how many calls one graph holds (the calls
    walk through the sets in turn)."""

    sets: int
    calls: int


class Device:
    """What the timers need to know about where the calls run."""

    def __init__(self, gpu: bool):
        self.gpu = gpu
        self.torch = torch.device("cuda" if gpu else "cpu")
        if gpu:
            props = torch.cuda.get_device_properties(0)
            self.name = props.name
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
            self.sms = props.multi_processor_count
        else:
            self.name = "cpu (--check: wall-clock times, not a benchmark)"
            self.l2_bytes, self.sms = 32 * 2**20, 1

    def plan(self, bytes_per_call: int, check: bool) -> Plan:
        """Enough sets that one graph's inputs and outputs overflow L2 three times, so no call
        reads what an earlier one left in L2; one set where a single call already moves 8x L2."""
        if check:
            return Plan(2, 2)
        if bytes_per_call >= 8 * self.l2_bytes:
            return Plan(1, MIN_CALLS)
        sets = max(2, min(MAX_SETS, math.ceil(3 * self.l2_bytes / max(bytes_per_call, 1))))
        return Plan(sets, max(MIN_CALLS, sets))

    def synchronize(self) -> None:
        if self.gpu:
            torch.cuda.synchronize()


class GraphTimer:
    """Per-call time of calls replayed from one CUDA graph (see the module docstring)."""

    def __init__(self, replays: int = 10, pad_us: float = 200.0):
        from bench.bench_kernels import GpuTimer

        self.replays = replays
        self.pad_cycles = GpuTimer._cycles_for(pad_us)

    @staticmethod
    def capture(calls: Sequence[Call], *, stream=None, relaxed: bool = False):
        """(graph, what the first call returned during capture: the graph's output tensors for it).
        ``relaxed``: ONNX Runtime's runs make CUDA calls that the default mode refuses during capture
        (its allocator's bookkeeping) though they put nothing on the stream.

        Every call's result is held until the capture ends: a call that allocates its output (as
        torch.compile's does) then writes a buffer of its own, as the preallocated outputs of
        graphopt's calls and of the copies are. Dropped, each output's memory went to the next call,
        so every replayed call wrote the same buffer, which could stay in L2."""
        graph = torch.cuda.CUDAGraph()
        mode = "relaxed" if relaxed else "global"
        with torch.cuda.graph(graph, stream=stream, capture_error_mode=mode):
            results = [call() for call in calls]
        torch.cuda.synchronize()
        return graph, results[0]

    def replay_us(self, graph, calls: int) -> float:
        graph.replay()  # (the first replay uploads the graph)
        torch.cuda.synchronize()
        samples = []
        for _ in range(self.replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(self.pad_cycles)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / calls)
        return statistics.median(samples)


def cupti_us(calls: Sequence[Call], rounds: int = 3) -> float:
    """Kernel (and memcpy) time per call from the CUDA profiler: the sum of device activity, so
    host gaps between calls do not count."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for call in calls:
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(rounds):
            for call in calls:
                call()
        torch.cuda.synchronize()
    total = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    if total <= 0:
        raise RuntimeError("the profiler saw no device activity")
    return total / (rounds * len(calls))


def wall_us(calls: Sequence[Call], repeats: int = 3, warm: bool = True) -> float:
    for call in calls if warm else ():
        call()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for call in calls:
            call()
        samples.append((time.perf_counter() - start) * 1e6 / len(calls))
    return statistics.median(samples)


def copy_bandwidth(device: Device) -> float:
    """Bytes read plus written per second by a large device copy: the roofline's bandwidth."""
    if device.gpu:
        from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s

        return copy_bandwidth_bytes_per_s(1 << 30)
    src = torch.empty(64 * 2**20, dtype=torch.uint8).random_(0, 255)
    dst = torch.empty_like(src)
    return 2 * src.numel() / (wall_us([lambda: dst.copy_(src)]) * 1e-6)


def copy_buffers(nbytes: int, plan: Plan, device: Device) -> tuple[list, list]:
    """(sources, destinations) for copies moving ``nbytes`` in all: half read, half written."""
    half = max(16, (nbytes // 2 + 15) // 16 * 16)
    srcs = [
        torch.empty(half, dtype=torch.uint8, device=device.torch).random_(0, 255) for _ in range(plan.sets)
    ]
    return srcs, [torch.empty_like(s) for s in srcs]


def copy_calls(srcs: list, dsts: list, at: list[int]) -> dict[str, list[Call]]:
    """Device copies per method, call j on buffer set ``at[j]``: a memcpy (``copy_``), ``clone`` (an
    allocation, from the graph's pool when captured, and the same copy) and an elementwise kernel on
    the SMs over 4-byte words."""
    words = [(s.view(torch.int32), d.view(torch.int32)) for s, d in zip(srcs, dsts, strict=True)]
    return {
        "copy_": [lambda i=i: dsts[i].copy_(srcs[i]) for i in at],
        "clone": [lambda i=i: srcs[i].clone() for i in at],
        # (bitwise_or with 0 reads every word and writes it back out: a copy as a kernel does it)
        "elementwise": [lambda i=i: torch.bitwise_or(words[i][0], 0, out=words[i][1]) for i in at],
    }


def time_calls(
    calls: Sequence[Call],
    device: Device,
    timer: GraphTimer | None,
    checker,
    *,
    stream=None,
    relaxed: bool = False,
) -> dict:
    """{"us", "timing"} of ``calls`` (or {"error"}): replayed from a CUDA graph where capture works,
    else from the profiler. ``checker`` (``poison(outputs)``, ``check(outputs)`` -> None or why not)
    judges what the first call returns, NaN-poisoned first: once run eagerly, and on a GPU once more
    after a graph replay, which proves the graph holds the work."""
    checker.poison(calls[0]())
    device.synchronize()
    if problem := checker.check(calls[0]()):
        return {"error": problem}
    if not device.gpu:  # (a check of the logic: the interpreter is slow, so one round)
        return {"us": wall_us(calls, repeats=1, warm=False), "timing": "wall_clock"}
    for call in calls:  # (every input set once: first-run allocations happen outside the capture)
        call()
    device.synchronize()
    try:
        graph, first = GraphTimer.capture(calls, stream=stream, relaxed=relaxed)
    except Exception as error:  # (ONNX Runtime may refuse capture: the profiler still times it)
        torch.cuda.synchronize()
        why = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:200]
        return {"us": cupti_us(calls), "timing": f"cupti (graph capture failed: {why})"}
    try:
        checker.poison(first)
        graph.replay()
        torch.cuda.synchronize()
        if problem := checker.check(first):
            return {"error": f"after a graph replay: {problem}"}
        return {"us": timer.replay_us(graph, len(calls)), "timing": f"cuda_graph x{len(calls)}"}
    finally:
        del graph
