"""The per-feature split-stack model (each feature its own LayerNorm) against the shared-norm seed of
the same size, on a GPU: eager PyTorch and ORT's CUDA EP on the original, graphopt through torch
(direct call) and through ORT (CUDA EP with graphopt's kernels) on the optimized model.

    PYTHONPATH=. python bench/bench_per_feature.py [--n 128 --b 1024 --d 256] [--out bench/results]

Writes OUT/per_feature.json: start-to-finish and GPU µs per runtime, for the seed (models/split_stack.py),
the per-feature model with a shared Linear(D, 1), and with per-feature Linear(D, 4).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch  # before onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from bench.bench_seed_sweep import measure
from graphopt.benchmark.ort_cuda import ort_cuda_callable
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s
from graphopt.runtime import direct_callable, to_device
from models.onnx_export import export_dynamo
from models.per_feature_split import PerFeatureSplitStack
from models.split_stack import SplitStack


def one(name, module, n, b, d, iters):
    x = torch.randn(n * b * d)
    row = {"model": name}
    with torch.no_grad():
        reference = module.cuda()(x.cuda()).float()
        xc = x.cuda()
        row["eager"] = measure(lambda: module(xc), reference, iters)
        program = torch.export.export(module.cpu(), (x,))
        optimized, _ = graphopt.optimize(program, verify=False)
        row["graphopt_ops"] = [str(n.target) for n in optimized.graph.nodes if n.op == "call_function"]
        direct = direct_callable(to_device(optimized, "cuda"))
        row["graphopt_torch"] = measure(lambda: direct(xc), reference, iters)
    original = export_dynamo(module.cpu(), (x,))
    (input_name,) = [i.name for i in original.graph.input]
    for label, model, library in (("ort", original, False), ("graphopt_ort", None, True)):
        try:
            if model is None:
                model, _ = graphopt.optimize(original, verify=False)
                row["graphopt_onnx_ops"] = [node.op_type for node in model.graph.node]
            call = ort_cuda_callable(model, {input_name: xc}, cuda_graph=False, with_library=library)
            row[label] = measure(call, reference, iters)
        except Exception as error:  # a failed runtime is a result
            row[label] = {"error": f"{type(error).__name__}: {error}"[:200]}
    torch.cuda.empty_cache()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--b", type=int, default=1024)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_per_feature: no CUDA device found; this benchmark needs a GPU", file=sys.stderr)
        return 2
    n, b, d = args.n, args.b, args.d
    models = {
        "seed_shared_norm": SplitStack(n, b, d).eval(),
        "per_feature_norm": PerFeatureSplitStack(n, b, d).eval(),
        "per_feature_norm_linear4": PerFeatureSplitStack(n, b, d, hidden=4).eval(),
    }
    rows = []
    for name, module in models.items():
        rows.append(one(name, module, n, b, d, args.iters))
        print(json.dumps(rows[-1]), flush=True)
    record = {
        "benchmark": "per-feature split-stack vs the shared-norm seed",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "copy_bandwidth_TBps": round(copy_bandwidth_bytes_per_s() / 1e12, 3),
        "N": n, "B": b, "D": d,
        "rows": rows,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "per_feature.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out / 'per_feature.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
