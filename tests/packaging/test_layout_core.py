"""The rewrite core (IR + matcher + driver + pipeline) stays no larger than it was when issue #18 set
the limit: 2,107 lines, counted as ``wc -l graphopt/ir/*.py graphopt/rewrite/*.py graphopt/pipeline.py``.

Every module in those folders counts, so a new file there cannot grow the core unseen. What reads a
graph without rewriting it (evaluation on constants, verify, the text form, traffic) is in
graphopt/analysis/; helpers of one stage's passes are in that stage (passes/recognize/origin.py,
passes/horizontal/batching/reachability.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE_LIMIT = 2107  # lines; the size of the core when the limit was set (2026-11-25)


def core_files() -> list[Path]:
    return [
        *sorted((ROOT / "graphopt" / "ir").glob("*.py")),
        *sorted((ROOT / "graphopt" / "rewrite").glob("*.py")),
        ROOT / "graphopt" / "pipeline.py",
    ]


def test_the_core_is_what_the_issue_names():
    names = {str(path.relative_to(ROOT)) for path in core_files()}
    assert {"graphopt/ir/graph.py", "graphopt/rewrite/pattern.py", "graphopt/rewrite/driver.py"} <= names
    assert "graphopt/pipeline.py" in names
    assert not list((ROOT / "graphopt" / "ir").glob("*/*.py")), "a subpackage of ir/ would escape the count"
    assert not list((ROOT / "graphopt" / "rewrite").glob("*/*.py")), "a subpackage would escape the count"


def test_the_rewrite_core_is_no_larger_than_2107_lines():
    counts = {str(path.relative_to(ROOT)): path.read_bytes().count(b"\n") for path in core_files()}
    total = sum(counts.values())
    listing = "\n".join(f"{count:5d} {name}" for name, count in counts.items())
    assert total <= CORE_LIMIT, f"the rewrite core is {total} lines (limit {CORE_LIMIT}):\n{listing}"
