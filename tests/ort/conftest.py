"""Fixtures of the custom-op library tests; the model helpers live in ort_models.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from ort_models import fused_model, run_model

from graphopt.ort import library_path


@pytest.fixture(scope="session")
def library() -> str:
    return library_path()  # raises, naming how to build it, when the library is missing


@pytest.fixture
def run_fused(library) -> Callable[..., list[np.ndarray]]:
    """run_fused(op_name, inputs, attributes, dtype, outputs=("Y",), threads=1) -> outputs."""

    def run(op_name, inputs, attributes, dtype, outputs=("Y",), threads=1):
        model = fused_model(op_name, inputs, attributes, dtype, outputs)
        return run_model(model, inputs, threads)

    return run
