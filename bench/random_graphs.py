"""The long profile of the random-program properties: graph i is models/random_program.py's seed i.

    python bench/random_graphs.py --count 10000                 # ONNX form, both cores
    python bench/random_graphs.py --count 1000 --form torch
    python bench/random_graphs.py --count 20 --start 4711       # replay a range (a failure's seed)

For each program: the optimized model computes what the original computes on every draw of the
numeric check (standard-normal inputs and the adversarial ones: rows with a large common offset,
large magnitudes, constant rows; graphopt/verification/draws.py) and on inputs with NaN and
infinities (models/random_draws.py), drawn afresh for each program, verify(graph) holds after every
pass, and optimizing the optimized model gives the same model (models/random_checks.py). The figures
(graphs, failures with their seeds and the draw each failed on, time, rules exercised, machine,
date) go to bench/results/random_graphs_<form>.json; the exit code is 1 if any graph failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
CASE_SECONDS = 300  # one graph taking longer than this is a failure (a hang)


def _init_worker() -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import logging

    logging.disable(logging.WARNING)  # (the optimizer's warnings are not failures; errors raise)
    import warnings

    # (nor NumPy's overflow and invalid-value warnings, which the stress and NaN/inf draws raise in
    # the float64 evaluations)
    warnings.simplefilter("ignore", RuntimeWarning)


def run_one(job: tuple[int, str]) -> dict:
    """One graph: its seed, the rules it exercised, or the failure."""
    import signal

    from models.random_checks import check_program
    from models.random_program import SeededChoices, draw_program

    seed, form = job

    def timeout(*_):
        raise TimeoutError(f"took more than {CASE_SECONDS} s")

    signal.signal(signal.SIGALRM, timeout)
    signal.alarm(CASE_SECONDS)
    try:
        program = draw_program(SeededChoices(seed), torch_form=form == "torch")
        rules = check_program(program, form)
        return {"seed": seed, "rules": rules, "dtype": program.dtype}
    except Exception as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        failure = {"seed": seed, "error": f"{type(error).__name__}: {message[:500]}"}
        report = getattr(error, "report", None)
        if report is not None and report.verification:
            failed = [d["name"] for d in report.verification.get("draws", ()) if not d["ok"]]
            failure["draws"] = failed
        return failure
    finally:
        signal.alarm(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--form", choices=("onnx", "torch"), default="onnx")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--out", type=Path, default=None, help="default: bench/results/random_graphs_<form>.json"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from graphopt.ir import DType
    from graphopt.verification.draws import random_draws
    from models.random_draws import adversarial_draws

    specs = {"x": (DType.FLOAT32, (2, 8))}

    jobs = [(seed, args.form) for seed in range(args.start, args.start + args.count)]
    started = time.perf_counter()
    rules, graphs_with_rule, dtypes, failed_draws = Counter(), Counter(), Counter(), Counter()
    failures = []
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.workers, initializer=_init_worker, maxtasksperchild=500) as pool:
        for done, result in enumerate(pool.imap_unordered(run_one, jobs, chunksize=8), 1):
            if "error" in result:
                failures.append(result)
                failed_draws.update(result.get("draws", ()))
                print(f"seed {result['seed']}: {result['error']}", flush=True)
            else:
                rules.update(result["rules"])
                graphs_with_rule.update(result["rules"].keys())
                dtypes[result["dtype"]] += 1
            if done % 500 == 0:
                rate = done / (time.perf_counter() - started)
                print(f"{done}/{len(jobs)} graphs, {len(failures)} failures, {rate:.1f} graphs/s", flush=True)
    seconds = time.perf_counter() - started
    record = {
        "what": (
            "random programs: outputs preserved on every draw of the numeric check, verify(graph) after "
            "every pass, optimize twice = once"
        ),
        "draws": [d.name for d in (*random_draws(specs), *adversarial_draws(specs))],
        "form": args.form,
        "seeds": [args.start, args.start + args.count - 1],
        "graphs": len(jobs),
        "failures": len(failures),
        "failed": sorted(failures, key=lambda f: f["seed"]),
        "failures_by_draw": dict(failed_draws),
        "seconds": round(seconds, 1),
        "graphs_per_second": round(len(jobs) / seconds, 2),
        "workers": args.workers,
        "dtypes": dict(dtypes),
        "rewrites": dict(rules.most_common()),
        "graphs_with_rule": dict(graphs_with_rule.most_common()),
        "machine": _machine(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    out = args.out or RESULTS / f"random_graphs_{args.form}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"{len(jobs)} graphs, {len(failures)} failures, {seconds:.0f} s; wrote {out}")
    return 1 if failures else 0


def _machine() -> dict:
    import numpy
    import onnx
    import onnxruntime
    import torch

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": numpy.__version__,
    }


if __name__ == "__main__":
    sys.exit(main())
