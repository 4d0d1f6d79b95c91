"""How long optimizing the seed takes on the CPU machine as N grows (B=1024, D=256, fp32).

The seed's split_stack with N slices, exported with the TorchScript ONNX exporter and with
torch.export, optimized by graphopt.optimize: without the numeric check (the passes, load and save:
the goal is under 1 s at N = 512) and with it (which runs both models once on random inputs).
Writes bench/results/seed_optimize_cpu.{json,md}.

    python bench/bench_seed_optimize.py [--n 16 64 256 512]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

import graphopt
from models.onnx_export import export_torchscript
from models.split_stack import SplitStack, example_inputs

RESULTS = Path(__file__).resolve().parent / "results"
B, D = 1024, 256


def seconds(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(n: int, repeat: int) -> list[dict]:
    module, args = SplitStack(n, B, D).eval(), example_inputs(n, B, D)
    models = {
        "ONNX (TorchScript exporter)": export_torchscript(module, args, input_names=["input_data"]),
        "torch.export": torch.export.export(module, args),
    }
    rows = []
    for frontend, model in models.items():
        _, report = graphopt.optimize(model, verify=False)
        quick = seconds(lambda m=model: graphopt.optimize(m, verify=False), repeat)
        rows.append(
            {
                "n": n,
                "frontend": frontend,
                "nodes_before": report.nodes_before,
                "nodes_after": report.nodes_in_output,
                "ops_after": report.ops_after,
                "seconds_no_check": round(quick, 3),
                "seconds_with_check": round(seconds(lambda m=model: graphopt.optimize(m), 1), 3),
            }
        )
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16, 64, 256, 512])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = [row for n in args.n for row in measure(n, args.repeat)]
    record = {
        "what": f"graphopt.optimize of the seed split_stack, B={B}, D={D}, fp32, median of {args.repeat}",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "load_average_at_end": os.getloadavg()[0],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "seed_optimize_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Optimizing the seed on the CPU machine",
        "",
        f"{record['date']}, {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{record['load_average_at_end']:.1f} at the end; `python bench/bench_seed_optimize.py` "
        f"(B={B}, D={D}, fp32; median of {args.repeat} without the check, one run with it).",
        "",
        "| N | frontend | nodes before → after | optimize s (no check) | optimize s (with check) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['frontend']} | {r['nodes_before']} → {r['nodes_after']} | "
            f"{r['seconds_no_check']:.3f} | {r['seconds_with_check']:.3f} |"
        )
    (RESULTS / "seed_optimize_cpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
