"""Start-to-finish times of several calls, measured in interleaved rounds, with a noise figure each.

Timing one variant after another lets slow drifts (clock boost, a neighbour on the host, the allocator
settling) land on whichever variant ran at that moment: two variants with the same GPU time then differ
by a third. Here every round runs a block of calls of every variant, in an order that rotates from round
to round, so a drift touches all of them alike. A variant's time is the median over rounds of its
block's median call; its noise is half the interquartile range of those round medians, relative to the
median: a difference between two variants smaller than their noise is not a difference.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class Timing:
    median_us: float
    noise: float  # half the interquartile range of the round medians, over the median
    rounds: int
    calls_per_round: int


def interleaved_us(
    calls: Sequence[Callable[[], object]],
    *,
    rounds: int = 11,
    block: int = 20,
    warmup: int = 10,
    synchronize: Callable[[], None] | None = None,
) -> list[Timing]:
    """The start-to-finish time of each of ``calls``: one call, then ``synchronize`` (the device's, so
    the time is what a caller waits for), timed alone."""
    sync = synchronize or (lambda: None)
    for call in calls:
        for _ in range(warmup):
            call()
        sync()
    samples: list[list[float]] = [[] for _ in calls]
    enabled = gc.isenabled()
    gc.disable()  # (a collection inside a timed call is noise of the harness, not of the variant)
    try:
        for round_index in range(rounds):
            shift = round_index % len(calls) if calls else 0
            for index in [*range(shift, len(calls)), *range(shift)]:
                call, times = calls[index], []
                for _ in range(block):
                    start = time.perf_counter()
                    call()
                    sync()
                    times.append(time.perf_counter() - start)
                samples[index].append(statistics.median(times) * 1e6)
    finally:
        if enabled:
            gc.enable()
    return [_summary(s, block) for s in samples]


def _summary(round_medians: list[float], block: int) -> Timing:
    median = statistics.median(round_medians)
    if len(round_medians) >= 4:
        low, _, high = statistics.quantiles(round_medians, n=4)
        noise = (high - low) / 2 / median
    else:
        noise = (max(round_medians) - min(round_medians)) / 2 / median
    return Timing(median, noise, len(round_medians), block)
