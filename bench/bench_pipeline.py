"""CPU benchmark: load → all passes → save on synthetic ONNX graphs of 5k, 20k and 50k nodes.

Side by side with onnxslim on the same files. Goal: at most 5 s at 50k nodes, growing linearly.
Writes bench/results/pipeline_cpu.{json,md}.

    python bench/bench_pipeline.py [--sizes 5000 20000 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from bench.synthetic import make_synthetic

RESULTS = Path(__file__).resolve().parent / "results"


def time_graphopt(source: Path, folder: Path) -> tuple[float, int, int, dict]:
    start = time.perf_counter()
    _, report = graphopt.optimize(source, output=folder / "graphopt.onnx", verify=False)
    seconds = time.perf_counter() - start
    return seconds, report.nodes_before, report.nodes_in_output, report.seconds


SLIM_SCRIPT = """
import sys, time, onnx, onnxslim
start = time.perf_counter()
model = onnxslim.slim(sys.argv[1])
onnx.save(model, sys.argv[2])
print(time.perf_counter() - start, len(model.graph.node))
"""


def time_onnxslim(source: Path, folder: Path, timeout: float) -> tuple[float | None, int | None, str]:
    """onnxslim in a subprocess, so a run that takes too long can be stopped and reported as such."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", SLIM_SCRIPT, str(source), str(folder / "onnxslim.onnx")],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, None, f"not finished after {timeout:.0f} s"
    if done.returncode != 0:
        return None, None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
    seconds, nodes = done.stdout.split()[-2:]
    return float(seconds), int(nodes), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 50000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slim-timeout", type=float, default=600, help="seconds onnxslim may take per graph")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="graphopt-bench-") as tmp:
        folder = Path(tmp)
        for size in args.sizes:
            source = folder / f"synthetic_{size}.onnx"
            onnx.save(make_synthetic(size, seed=0), source)
            runs = [time_graphopt(source, folder) for _ in range(args.repeat)]
            seconds = statistics.median(r[0] for r in runs)
            phases = {k: round(statistics.median(r[3][k] for r in runs), 3) for k in runs[0][3]}
            slim_seconds, slim_nodes, slim_note = time_onnxslim(source, folder, args.slim_timeout)
            rows.append(
                {
                    "nodes": size,
                    "graphopt_seconds": round(seconds, 3),
                    "graphopt_us_per_node": round(seconds / size * 1e6, 1),
                    "graphopt_phases": phases,
                    "graphopt_nodes_after": runs[0][2],
                    "onnxslim_seconds": round(slim_seconds, 3) if slim_seconds else None,
                    "onnxslim_nodes_after": slim_nodes,
                    "onnxslim_note": slim_note,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    record = {
        "benchmark": "load → all passes → save (no numeric check), median of runs",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": os.getloadavg()[0],
        "repeat": args.repeat,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pipeline_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Pipeline speed on synthetic graphs (CPU)",
        "",
        f"{record['date']}, {record['machine']}, load average {record['load_average']:.1f} at the end; "
        f"median of {args.repeat} runs (onnxslim: one run). `python bench/bench_pipeline.py`",
        "",
        "| nodes | graphopt s | µs/node | load / passes / build / write s | nodes after "
        "| onnxslim s | onnxslim nodes after |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        p = row["graphopt_phases"]
        phases = " / ".join(str(p.get(k, "-")) for k in ("load", "passes", "build", "write"))
        lines.append(
            f"| {row['nodes']} | {row['graphopt_seconds']} | {row['graphopt_us_per_node']} | {phases} | "
            f"{row['graphopt_nodes_after']} | {row['onnxslim_seconds'] or row['onnxslim_note']} "
            f"| {row['onnxslim_nodes_after'] or '-'} |"
        )
    (RESULTS / "pipeline_cpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
