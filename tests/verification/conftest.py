import pytest
from broken_pass import BROKEN_PASS

from graphopt import pipeline


@pytest.fixture
def broken_pipeline(monkeypatch):
    """The pipeline with the broken pass after the canonicalizing passes."""
    steps = list(pipeline.PIPELINE)
    steps.insert(5, BROKEN_PASS)
    monkeypatch.setattr(pipeline, "PIPELINE", tuple(steps))
    return tuple(steps)
