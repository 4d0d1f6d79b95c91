"""The seed through ONNX Runtime called from C++ (bench/ort_native/ort_run_timer.cc), on a GPU machine.

Python's binding adds its own per-run cost (run_with_iobinding, argument conversion) on top of ONNX
Runtime's; a deployed C++ service does not pay it. This runs a model's original, horizontally batched
and optimized forms, and a one-Relu model (the runtime's floor), through the C++ timer on the CUDA EP,
with and without CUDA graphs, and records start-to-finish (Run + device synchronize, median).
Models: the bundled seed (N=16, B=1024, D=256), the seed at recommendation scale (N=128, B=512,
D=256) and the per-feature model of that size (each feature its own LayerNorm; shared Linear(D, 1)).

    python bench/bench_ort_native.py [--models seed,seed_n128,per_feature_n128] [--out bench/results]
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
SCALE = {"n": 128, "b": 512, "d": 256}  # the recommendation scale of the N=128 rows


def _exported(module) -> onnx.ModelProto:
    from models.onnx_export import export_dynamo
    from models.split_stack import example_inputs

    return export_dynamo(module.eval(), example_inputs(**SCALE))


def _seed_n128() -> onnx.ModelProto:
    from models.split_stack import SplitStack

    return _exported(SplitStack(**SCALE))


def _per_feature_n128() -> onnx.ModelProto:
    from models.per_feature_split import PerFeatureSplitStack

    return _exported(PerFeatureSplitStack(**SCALE))


MODELS = {
    "seed": lambda: onnx.load(REPO / "models" / "split_stack.onnx"),
    "seed_n128": _seed_n128,
    "per_feature_n128": _per_feature_n128,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--models", default="seed", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--name", default="ort_native", help="file stem of the results")
    args = parser.parse_args()
    names = args.models.split(",")
    if unknown := [n for n in names if n not in MODELS]:
        parser.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    work = Path(tempfile.mkdtemp(prefix="ort_native_"))
    build = subprocess.run(
        ["bash", str(REPO / "bench" / "ort_native" / "build.sh"), str(work / "bin")],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        sys.exit(f"building the C++ timer failed:\n{build.stderr.strip()}")
    timer = build.stdout.split()[-1]
    models = {"floor: one Relu on 4 floats": one_relu_model()}
    for name in names:
        original = MODELS[name]()
        prefix = "" if names == ["seed"] else f"{name}: "
        models[f"{prefix}original"] = original
        models[f"{prefix}horizontal fusion only"] = graphopt.optimize(original, skip=VERTICAL_PASSES)[0]
        models[f"{prefix}graphopt (library registered)"] = graphopt.optimize(original)[0]
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
        "cuCtxSynchronize), median over the iterations; fp32; models: " + ", ".join(names),
        "command": "python bench/bench_ort_native.py " + " ".join(sys.argv[1:]),
        "device": torch.cuda.get_device_name(),
        "onnxruntime": __import__("onnxruntime").__version__,
        "iters": args.iters,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# ONNX Runtime called from C++",
        "",
        f"{record['device']}, onnxruntime {record['onnxruntime']}, {record['date']}; "
        f"`{record['command']}` (median of {args.iters} runs, each Run + device synchronize).",
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
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
