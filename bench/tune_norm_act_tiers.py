"""Searches NormAct block shapes on a GPU: for each (dtype, row length), every (block_m, num_warps,
iters) with 4 to 64 values per thread, timed from HBM (triton.testing.do_bench clears L2 before each
run), against the tier the launch rules pick today. The tiers live in graphopt/kernels/norm_act.py.

    python bench/tune_norm_act_tiers.py [--cases bfloat16:1024 float16:256 ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton.testing

from graphopt.fused.table import Activation, Norm
from graphopt.kernels.norm_act import norm_act_config, norm_act_kernel

ROWS = 16384


def time_shape(x, w, b, y, block_m: int, num_warps: int, iters: int) -> float:
    rows, cols = x.shape
    grid = (triton.cdiv(rows, block_m * iters),)

    def call():
        norm_act_kernel[grid](
            x, x, w, b, y, y, rows, cols, cols, 0, 1e-5, int(Norm.LAYER), int(Activation.GELU), 1, 1, 0,
            BLOCK_M=block_m, BLOCK_N=cols, ITERS=iters, LOOPED=False, num_warps=num_warps,
        )  # fmt: skip

    return triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3


def tune(dtype_name: str, cols: int) -> dict:
    dtype = getattr(torch, dtype_name)
    x = torch.randn(ROWS, cols, device="cuda").to(dtype)
    w, b = torch.randn(cols, device="cuda").to(dtype), torch.randn(cols, device="cuda").to(dtype)
    y = torch.empty_like(x)
    current = norm_act_config(ROWS, cols, dtype_name).tier
    results = []
    for block_m, num_warps, iters in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16), (1, 2, 4)):
        per_thread = block_m * cols // (32 * num_warps)
        if not 4 <= per_thread <= 64:
            continue
        us = time_shape(x, w, b, y, block_m, num_warps, iters)
        results.append({"block_m": block_m, "num_warps": num_warps, "iters": iters, "us": round(us, 2)})
    results.sort(key=lambda r: r["us"])
    now = None
    if not current.looped:
        now = round(time_shape(x, w, b, y, current.block_m, current.num_warps, current.iters), 2)
    best = results[:6]
    return {"dtype": dtype_name, "cols": cols, "current": current.name, "current_us": now, "best": best}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["bfloat16:1024", "float16:1024", "bfloat16:256"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    found = []
    for case in args.cases:
        dtype_name, cols = case.split(":")
        found.append(tune(dtype_name, int(cols)))
        print(json.dumps(found[-1]), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "norm_act_tiers.json").write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
