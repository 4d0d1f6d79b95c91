"""One row of the coverage table: optimize one exported file, numeric check on, and record what happened."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import graphopt
from graphopt.files import model_files

from .ort_fusions import graphopt_norms

NEAR_MISS_EXAMPLES = 3
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # (the exporters colour their messages for terminals)


def error_line(error: BaseException, limit: int = 400) -> str:
    """The first line of ``error``, named by its type, without terminal colour codes."""
    return _COLOURS.sub("", f"{type(error).__name__}: {error}").splitlines()[0][:limit]


def _fusion_passes() -> tuple[str, ...]:
    """The passes whose rules fuse or recognize something (the recognize, horizontal and fuse stages,
    and the batch-norm folds); the rest canonicalize and clean up, and restore_unfused gives back."""
    from graphopt.passes import canonicalize, fuse, horizontal, recognize

    from graphopt.rewrite import Pass

    stages = [vars(stage).values() for stage in (recognize, horizontal, fuse)]
    names = [p.name for values in stages for p in values if isinstance(p, Pass)]
    names += [canonicalize.FOLD_BATCH_NORM.name, canonicalize.FOLD_ONNX_BATCH_NORM.name]
    return tuple(n for n in names if n != recognize.RESTORE_UNFUSED.name)


FUSION_PASSES = _fusion_passes()


def optimize_file(path: Path, output: Path) -> dict[str, Any]:
    """Optimizes ``path`` into ``output``; a failure becomes a row with the reason, never an exception."""
    start = time.perf_counter()
    try:
        _, report = graphopt.optimize(path, output=output)
    except Exception as error:  # the row records the failure; the run goes on with the next model
        return {
            "status": "failed",
            "error": error_line(error),
            "optimize_seconds": round(time.perf_counter() - start, 3),
        }
    seconds = time.perf_counter() - start
    data = report.to_json()
    misses = [m for p in data["passes"] for m in p["near_misses"]]
    fusions: dict[str, int] = {}
    for step in data["passes"]:
        if step["name"] in FUSION_PASSES:
            for rule, count in step["counts"].items():
                fusions[rule] = fusions.get(rule, 0) + count
    verification = data["verification"] or {}
    return {
        "status": "ok" if verification.get("ok") else "mismatch",
        "nodes_before": data["nodes"]["before"],
        "nodes_after": data["nodes"]["written"],  # the optimized file's nodes, as the picture counts them
        "rules": report.rule_counts,
        "fusions": fusions,
        "near_misses": {
            "count": len(misses),
            "examples": _examples(misses),
        },
        "optimize_seconds": round(seconds, 3),
        "pass_seconds": round(data["seconds"].get("passes", 0.0), 3),
        "max_abs_error": max((o.get("max_abs", 0.0) for o in verification.get("outputs", [])), default=None),
        "verification": verification.get("summary"),
        "norms": graphopt_norms(data["ops"]["after"], model_files.load(output).graph, report.rule_counts),
        "ops_after": data["ops"]["after"],
        "notes": data.get("notes", []),
    }


def _examples(misses: list[dict]) -> list[str]:
    """The first few near misses, one per rule and reason, so the table shows variety, not repeats."""
    seen, examples = set(), []
    for miss in misses:
        key = (miss["rule"], re.sub(r"'[^']*'|\(.*?\)|\d+", "_", miss["reason"]))
        if key in seen:
            continue
        seen.add(key)
        examples.append(f"{miss['rule']}: {miss['reason']}")
        if len(examples) == NEAR_MISS_EXAMPLES:
            break
    return examples
