"""Timing on a GPU: start-to-finish time of one synchronized call, and the GPU time of its kernels.

Start-to-finish is what a caller waits for: launch overhead included, measured as the seed does (one
call, then synchronize; median of many). GPU time is the sum of the call's kernel durations, read from
the profiler, so it counts only what the device did.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def start_to_finish_us(call: Callable[[], object], *, warmup: int = 20, iters: int = 200) -> float:
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def gpu_us(call: Callable[[], object], *, iters: int = 20) -> float | None:
    """Kernel time per call from the CUDA profiler (kernels of every library in the process)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        torch.cuda.synchronize()
    total = 0.0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            total += event.device_time if hasattr(event, "device_time") else event.cuda_time
    return total / iters if total else None


def copy_bandwidth_bytes_per_s(size_bytes: int = 1 << 30, iters: int = 20) -> float:
    """Bytes read plus written per second by a large device-to-device copy: the HBM roofline."""
    source = torch.empty(size_bytes // 4, dtype=torch.float32, device="cuda").normal_()
    target = torch.empty_like(source)
    target.copy_(source)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        target.copy_(source)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / iters
    return 2 * source.numel() * 4 / seconds
