"""Hypothesis strategies for random programs (models/random_program.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from models.random_program import Program, draw_program


class HypothesisChoices:
    """The generator's choices drawn from hypothesis, so that a failure shrinks to a small program."""

    def __init__(self, data):
        self.data = data

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))

    def choice(self, options):
        return self.data.draw(st.sampled_from(options))


@st.composite
def programs(draw, *, torch_form: bool = False, max_steps: int = 5) -> Program:
    data = draw(st.data())
    return draw_program(HypothesisChoices(data), max_steps=max_steps, torch_form=torch_form)
