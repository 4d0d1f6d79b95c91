"""Interleaved timing: every round runs a block of every call, in a rotating order; the noise figure is
half the interquartile range of the round medians over their median."""

import itertools

import pytest

from graphopt.benchmark import rounds
from graphopt.benchmark.rounds import interleaved_us


def test_every_round_runs_a_block_of_every_call_in_a_rotating_order():
    order = []
    calls = [lambda k=k: order.append(k) for k in "abc"]
    timings = interleaved_us(calls, rounds=4, block=2, warmup=1)
    assert order[:3] == ["a", "b", "c"]  # (the warm-up, one call each)
    blocks = [k for k, _ in itertools.groupby(order[3:])]
    assert blocks == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert len(order) == 3 + 4 * 3 * 2
    assert [(t.rounds, t.calls_per_round) for t in timings] == [(4, 2)] * 3


def test_the_time_is_the_median_of_round_medians_and_the_noise_half_the_iqr(monkeypatch):
    # one call; each timed call takes the next of these durations (µs), two calls a round
    durations = iter([10, 12, 20, 22, 30, 32, 40, 42, 50, 52])
    clock = [0.0]

    def fake_clock():
        return clock[0]

    def call():
        clock[0] += next(durations, 0) * 1e-6

    monkeypatch.setattr(rounds.time, "perf_counter", fake_clock)
    (timing,) = interleaved_us([call], rounds=5, block=2, warmup=0)
    # round medians 11, 21, 31, 41, 51: median 31, quartiles (exclusive method) 16 and 46
    assert timing.median_us == pytest.approx(31)
    assert timing.noise == pytest.approx((46 - 16) / 2 / 31)
