"""The seed through ONNX Runtime called from C++ (bench/ort_native/ort_run_timer.cc), on a GPU machine.

Python's binding adds its own per-run cost (run_with_iobinding, argument conversion) on top of ONNX
Runtime's; a deployed C++ service does not pay it. This runs the seed's original, horizontally batched
and optimized models, and a one-Relu model (the runtime's floor), through the C++ timer on the CUDA EP,
with and without CUDA graphs, and records start-to-finish (Run + device synchronize, median).

    python bench/bench_ort_native.py [--out bench/results] [--iters 2000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx

import graphopt
from graphopt.benchmark.compare import VERTICAL_PASSES
from graphopt.benchmark.floors import one_relu_model

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ort_native_"))
    build = subprocess.run(
        ["bash", str(REPO / "bench" / "ort_native" / "build.sh"), str(work / "bin")],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        sys.exit(f"building the C++ timer failed:\n{build.stderr.strip()}")
    timer = build.stdout.split()[-1]
    original = onnx.load(REPO / "models" / "split_stack.onnx")
    models = {
        "floor: one Relu on 4 floats": one_relu_model(),
        "original": original,
        "horizontal fusion only": graphopt.optimize(original, skip=VERTICAL_PASSES)[0],
        "graphopt (library registered)": graphopt.optimize(original)[0],
    }
    from graphopt.ort import library_path

    rows = []
    for label, model in models.items():
        path = work / f"{len(rows)}.onnx"
        onnx.save(model, path)
        for cuda_graph in (False, True):
            command = [timer, str(path), "--iters", str(args.iters)]
            command += ["--library", str(library_path())] if "library" in label else []
            command += ["--cuda-graph"] if cuda_graph else []
            done = subprocess.run(command, capture_output=True, text=True)
            row = {"model": label, "cuda_graph": cuda_graph}
            if done.returncode == 0:
                row.update({k: v for k, v in json.loads(done.stdout).items() if k.endswith("_us")})
            else:
                row["error"] = (done.stderr.strip().splitlines() or ["failed"])[-1][-300:]
            rows.append(row)
            print(row, flush=True)
    import torch

    record = {
        "what": "start-to-finish of one ONNX Runtime CUDA EP run called from C++ (IO binding, Run + "
        "cuCtxSynchronize), median over the iterations; the seed N=16 B=1024 D=256 fp32",
        "device": torch.cuda.get_device_name(),
        "onnxruntime": __import__("onnxruntime").__version__,
        "iters": args.iters,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ort_native.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# The seed through ONNX Runtime called from C++",
        "",
        f"{record['device']}, onnxruntime {record['onnxruntime']}, {record['date']}; "
        f"`python bench/bench_ort_native.py` (median of {args.iters} runs, each Run + device synchronize).",
        "",
        "| model | CUDA graph | median µs | p10 µs | p90 µs |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['cuda_graph']} | failed: {row['error']} | | |")
        else:
            lines.append(
                f"| {row['model']} | {'yes' if row['cuda_graph'] else 'no'} | {row['median_us']:.1f} | "
                f"{row['p10_us']:.1f} | {row['p90_us']:.1f} |"
            )
    (args.out / "ort_native.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
