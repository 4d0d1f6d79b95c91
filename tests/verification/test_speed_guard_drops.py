"""guard(): which passes --keep-paying-passes drops, decided on scripted timings (no clock involved)."""

import pytest

from graphopt.verification.speed_guard import SlowerModel, SpeedCheck, guard


def check(ratio: float) -> SpeedCheck:
    return SpeedCheck("cpu", "ONNX Runtime CPU EP", 100.0, 100.0 * ratio, ratio, 0.02, 15)


class Timings:
    """time_against(current, candidate) answers from a script: the ratios, in order, of each timing of
    a candidate (a frozenset of the passes it drops) against the model it would replace, and of each
    model against the original (current None)."""

    def __init__(self, versus: dict, alone: dict):
        self.versus = {k: list(v) for k, v in versus.items()}
        self.alone = alone
        self.calls = []

    def __call__(self, current, candidate):
        self.calls.append((current, candidate))
        if current is None:
            return check(self.alone[candidate])
        return check(self.versus[candidate].pop(0))


def rebuild(dropped):
    return frozenset(dropped)


def test_a_drop_faster_twice_is_kept_and_the_search_stops_once_not_slower():
    timings = Timings({frozenset({"slow"}): [0.1, 0.1]}, {frozenset({"slow"}): 0.9})
    model, speed, dropped = guard(check(5.0), rebuild, ["fuse", "slow"], timings, "optimized")
    assert (model, dropped, speed.ratio) == (frozenset({"slow"}), ["slow"], 0.9)
    assert len(timings.calls) == 3  # twice against the optimized model, once against the original


def test_a_drop_faster_only_once_is_not_kept():
    # (the second timing disagrees: noise, not a pass that cost time)
    timings = Timings(
        {frozenset({"last"}): [0.9, 1.0], frozenset({"slow"}): [0.1, 0.1]}, {frozenset({"slow"}): 0.95}
    )
    model, _, dropped = guard(check(5.0), rebuild, ["fuse", "slow", "last"], timings, "optimized")
    assert dropped == ["slow"] and model == frozenset({"slow"})


def test_a_model_still_slower_without_every_pass_that_paid_is_refused():
    timings = Timings({frozenset({"b"}): [0.5, 0.5], frozenset({"b", "a"}): [1.0]}, {frozenset({"b"}): 1.5})
    with pytest.raises(SlowerModel, match=r"slower \(even without b\)"):
        guard(check(3.0), rebuild, ["a", "b"], timings, "optimized")


def test_without_keep_paying_passes_a_slower_model_is_refused_untouched():
    with pytest.raises(SlowerModel, match="slower: "):
        guard(check(1.5), None, ["a"], Timings({}, {}), "optimized")
    model, speed, dropped = guard(check(1.01), None, ["a"], Timings({}, {}), "optimized")
    assert (model, dropped, speed.ratio) == ("optimized", [], 1.01)
