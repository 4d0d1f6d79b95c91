"""The ONNX backend test suites (node, simple, pytorch-converted, pytorch-operator) through graphopt.

One test per suite: every model is optimized with the numeric check off and both models run in ONNX
Runtime against the expected outputs; a failure lists every model that went wrong. Models that hit a
known open bug are checked by their own expected-failure test instead, which passes once it is fixed.
"""

from __future__ import annotations

import functools

import pytest
from onnx_backend_cases import FAILURES, SUITES, Case, all_nodes, cases, failure_table, run_suite

from graphopt.ort import OrtLibraryNotFoundError, library_path

pytestmark = pytest.mark.slow


def _old_opset(case: Case) -> bool:
    return any(o.domain in ("", "ai.onnx") and o.version < 7 for o in case.model.opset_import)


def _split_sizes_at_run_time(case: Case) -> bool:
    initialized = {t.name for t in case.model.graph.initializer}
    return any(
        node.op_type == "Split" and len(node.input) > 1 and node.input[1] and node.input[1] not in initialized
        for node in all_nodes(case.model.graph)
    )


# Open bugs (issue 15) that the suite finds: a short name, what is wrong, and the models it affects.
KNOWN_ISSUES = {
    "opset-1-6": (
        "issue 15, refusals: opset 1-6 models are refused (upgrade them with onnx.version_converter)",
        _old_opset,
    ),
    "split-sizes-at-run-time": (
        "issue 15, item 1: Split sizes given at run time are folded as equal sizes (fold_split_sizes)",
        _split_sizes_at_run_time,
    ),
}


def _known_issue(case: Case) -> bool:
    return any(applies(case) for _, applies in KNOWN_ISSUES.values())


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
    outcomes = run_suite(list(_cases(suite)), library, exclude=_known_issue)
    assert outcomes, f"the {suite} suite has no models"
    failed = [o for o in outcomes if o.status in FAILURES]
    assert not failed, f"{len(failed)} of the {suite} models failed:\n{failure_table(outcomes)}"
    if suite == "node":
        # Guards the skip rules: most node models must run end to end.
        checked = sum(o.status == "ok" for o in outcomes)
        assert checked >= 0.75 * len(outcomes), failure_table(outcomes)


@pytest.mark.parametrize(
    "issue",
    [
        pytest.param(issue, marks=pytest.mark.xfail(strict=False, reason=what))
        for issue, (what, _) in KNOWN_ISSUES.items()
    ],
)
def test_known_issue(issue, library):
    what, applies = KNOWN_ISSUES[issue]
    affected = [case for suite in SUITES for case in _cases(suite) if applies(case)]
    assert affected, f"no model of the suites is affected by: {what}"
    outcomes = run_suite(affected, library)
    failed = [o for o in outcomes if o.status in FAILURES]
    assert not failed, f"{len(failed)} models still fail:\n{failure_table(outcomes)}"
