"""Searches NormAct block shapes on a GPU: for each (dtype, row length), every (block_m, num_warps,
iters) with 4 to 64 values per thread, against the tier the launch rules pick today. The tiers live
in graphopt/fused/norm_act/triton_kernel.py.

    python bench/tune_norm_act_tiers.py [--cases bfloat16:1024 float16:256 ...] [--exact] [--out FILE]

Times are kernel times from the CUDA profiler, inputs rotating past L2, as in
bench/bench_kernels.py (layer norm with scale and bias, GELU). ``--exact`` times the exact-width
variants (no column mask), which serve rows whose length equals the block; without it, the masked
variants that serve shorter rows.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from bench.bench_kernels import GpuTimer, copies_needed, measure_copy_bandwidth
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act.triton_kernel import norm_act_config, norm_act_kernel

ROWS = 16384


def shape_calls(xs, w, b, ys, block_m: int, num_warps: int, iters: int, exact: bool):
    rows, cols = xs[0].shape
    grid = (triton.cdiv(rows, block_m * iters),)

    def call(i):
        norm_act_kernel[grid](
            xs[i], xs[i], w, b, ys[i], ys[i], rows, cols, cols, 0, 1e-5,
            int(Norm.LAYER), int(Activation.GELU), 1, 1, 0, 1, 1, 1, 1, 1, rows,
            BLOCK_M=block_m, BLOCK_N=cols, ITERS=iters, LOOPED=False, EVEN=exact, SHARED=True,
            num_warps=num_warps,
        )  # fmt: skip

    return [lambda i=i: call(i) for i in range(len(xs))]


def tune(timer: GpuTimer, bandwidth: float, dtype_name: str, cols: int, exact: bool) -> dict:
    dtype = getattr(torch, dtype_name)
    nbytes = 2 * ROWS * cols * dtype.itemsize
    copies = copies_needed(nbytes)
    xs = [torch.randn(ROWS, cols, device="cuda").to(dtype) for _ in range(copies)]
    ys = [torch.empty_like(x) for x in xs]
    w, b = torch.randn(cols, device="cuda").to(dtype), torch.randn(cols, device="cuda").to(dtype)
    current = norm_act_config(ROWS, cols, dtype_name).tier
    roofline_us = nbytes / bandwidth * 1e6
    results = []
    for block_m, num_warps, iters in itertools.product((1, 2, 4, 8, 16), (1, 2, 4, 8, 16), (1, 2)):
        if iters > 1 and cols > 1024:  # (a second block per program only pays on short rows)
            continue
        per_thread = block_m * cols // (32 * num_warps)
        if not 4 <= per_thread <= 64:
            continue
        us = timer(shape_calls(xs, w, b, ys, block_m, num_warps, iters, exact)).gpu_us
        results.append({"block_m": block_m, "num_warps": num_warps, "iters": iters, "us": round(us, 2)})
    results.sort(key=lambda r: r["us"])
    return {
        "dtype": dtype_name,
        "cols": cols,
        "exact": exact,
        "roofline_us": round(roofline_us, 2),
        "current": current.name,
        "best": results[:6],
        "best_ratio": round(results[0]["us"] / roofline_us, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["bfloat16:1024", "float16:1024", "bfloat16:256"])
    parser.add_argument("--exact", action="store_true", help="the exact-width variants")
    parser.add_argument("--out", type=Path, default=None, help="a JSON file for the results")
    args = parser.parse_args()
    timer = GpuTimer(reps=100, warmup=10)
    bandwidth = measure_copy_bandwidth(timer, 1 << 30)
    record = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "triton": triton.__version__,
        "rows": ROWS,
        "copy_bandwidth_TBps": bandwidth / 1e12,
        "cases": [],
    }
    for case in args.cases:
        dtype_name, cols = case.split(":")
        found = tune(timer, bandwidth, dtype_name, int(cols), args.exact)
        record["cases"].append(found)
        print(json.dumps(found), flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
