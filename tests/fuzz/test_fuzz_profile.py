"""The CI profile of the loader and command-line fuzzing (bench/fuzz_loaders.py runs the long one):
damaged files never crash or print a traceback, bad input is one line and exit 2, failures write
nothing."""

import pytest

from bench.fuzz_loaders import build_corpus, run_case

CASES = range(100_000, 100_060)  # (far from the long run's cases, which start at 0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("corpus"), onnx_programs=2, torch_programs=1)


def test_damaged_files_end_cleanly(corpus, tmp_path):
    results = [run_case(case, corpus, tmp_path) for case in CASES]
    problems = [f"case {r['case']} ({r['mutation']}): {r['problem']}" for r in results if r["problem"]]
    assert not problems, "\n".join(problems)
    codes = {r["code"] for r in results}
    assert 2 in codes and 0 in codes  # (both refusals and successful runs were exercised)


def test_a_case_is_the_same_damage_every_time(corpus, tmp_path):
    from bench.fuzz_loaders import make_case

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    assert make_case(7, corpus, first)["mutation"] == make_case(7, corpus, second)["mutation"]
    kind = make_case(7, corpus, first)["source"].rsplit(".", 1)[1]
    assert (first / f"case.{kind}").read_bytes() == (second / f"case.{kind}").read_bytes()
