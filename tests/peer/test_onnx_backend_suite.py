"""The ONNX backend test suites (node, simple, pytorch-converted, pytorch-operator) through graphopt.

One test per suite: every model is optimized with the numeric check off and both models run in ONNX
Runtime against the expected outputs; a failure lists every model that went wrong.
"""

from __future__ import annotations

import functools

import pytest
from onnx_backend_cases import FAILURES, SUITES, Case, cases, failure_table, run_suite

from graphopt.ort import OrtLibraryNotFoundError, library_path

pytestmark = pytest.mark.slow


@functools.cache
def _cases(suite: str) -> tuple[Case, ...]:
    return tuple(cases(suite))


@pytest.fixture(scope="module")
def library() -> str | None:
    try:
        return library_path()
    except OrtLibraryNotFoundError:
        return None


@pytest.mark.parametrize("suite", SUITES)
def test_backend_suite(suite, library):
    outcomes = run_suite(list(_cases(suite)), library)
    assert outcomes, f"the {suite} suite has no models"
    failed = [o for o in outcomes if o.status in FAILURES]
    assert not failed, f"{len(failed)} of the {suite} models failed:\n{failure_table(outcomes)}"
    if suite == "node":
        # Guards the skip rules: most node models must run end to end.
        checked = sum(o.status == "ok" for o in outcomes)
        assert checked >= 0.75 * len(outcomes), failure_table(outcomes)
