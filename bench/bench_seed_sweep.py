"""The seed's split_stack across sizes, on a GPU: N ∈ {4, 16, 64, 256}, B ∈ {256, 1024, 8192},
D ∈ {64, 256, 1024}. Eager PyTorch and ORT's CUDA EP on the original, graphopt through torch (direct call
and CUDA graph) and through ORT on the optimized model; start-to-finish and GPU µs, and the HBM roofline.

    python bench/bench_seed_sweep.py [--out bench/results] [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
from pathlib import Path

import torch  # before onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from bench.onnx_models import split_stack
from graphopt.benchmark.ort_cuda import ort_cuda_callable
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us, start_to_finish_us
from graphopt.runtime import cuda_graphed, direct_callable, to_device
from models.split_stack import SplitStack


def measure(call, reference, iters):
    output = call()
    output = output[0] if isinstance(output, tuple | list) else output
    error = float((output.float() - reference).abs().max())
    return {
        "s2f_us": round(start_to_finish_us(call, warmup=5, iters=iters), 1),
        "gpu_us": round(gpu_us(call, iters=5), 1),
        "max_abs_err": error,
    }


def one(n, b, d, bandwidth, iters):
    module = SplitStack(n, b, d).cuda().eval()
    x = torch.randn(n * b * d, device="cuda")
    row = {"N": n, "B": b, "D": d, "roofline_us": round((x.numel() * 4 + n * b * 4) / bandwidth * 1e6, 2)}
    with torch.no_grad():
        reference = module(x).float()
        row["eager"] = measure(lambda: module(x), reference, iters)
        program = torch.export.export(module, (x,))
        optimized, _ = graphopt.optimize(to_device(program, "cpu"), verify=False)
        optimized = to_device(optimized, "cuda")
        direct = direct_callable(optimized)
        row["graphopt_torch"] = measure(lambda: direct(x), reference, iters)
        graphed = cuda_graphed(direct, [x], capture_inputs=True)
        row["graphopt_torch_cuda_graph"] = measure(lambda: graphed(x), reference, iters)
    weight = module.linear.weight.detach().cpu().numpy()
    bias = module.linear.bias.detach().cpu().numpy()
    original = split_stack(n, b, d, weight, bias)
    for label, model, library in (("ort", original, False), ("graphopt_ort", None, True)):
        try:
            if model is None:
                model, _ = graphopt.optimize(original, verify=False)
            call = ort_cuda_callable(model, {"x": x}, cuda_graph=False, with_library=library)
            row[label] = measure(call, reference, iters)
        except Exception as error:  # a failed runtime is a result
            row[label] = {"error": f"{type(error).__name__}: {error}"[:200]}
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--quick", action="store_true", help="a corner of the grid only")
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    grid = list(itertools.product((4, 16, 64, 256), (256, 1024, 8192), (64, 256, 1024)))
    if args.quick:
        grid = [(4, 256, 64), (16, 1024, 256)]
    bandwidth = copy_bandwidth_bytes_per_s()
    rows = []
    for n, b, d in grid:
        try:
            rows.append(one(n, b, d, bandwidth, args.iters))
        except Exception as error:  # e.g. out of memory at the largest sizes
            rows.append({"N": n, "B": b, "D": d, "error": f"{type(error).__name__}: {error}"[:200]})
            torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    record = {
        "benchmark": "seed split_stack sweep",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "copy_bandwidth_TBps": round(bandwidth / 1e12, 3),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "seed_sweep.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        f"# Seed sweep ({record['device']}, {record['date']}): start-to-finish µs (GPU µs)",
        "",
        "| N | B | D | roofline | eager | ORT CUDA | graphopt torch | graphopt torch+graph | graphopt ORT |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(r, key):
        v = r.get(key, {})
        return v.get("error", "-")[:40] if "s2f_us" not in v else f"{v['s2f_us']} ({v['gpu_us']})"

    for r in rows:
        lines.append(
            f"| {r['N']} | {r['B']} | {r['D']} | {r.get('roofline_us', '-')} | {cell(r, 'eager')} "
            f"| {cell(r, 'ort')} | {cell(r, 'graphopt_torch')} | {cell(r, 'graphopt_torch_cuda_graph')} "
            f"| {cell(r, 'graphopt_ort')} |"
        )
    (args.out / "seed_sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
