"""Probe on a GPU: do cache hints (loads with eviction_policy="evict_first", streaming ".cs" stores)
or other block shapes bring NormAct on short rows closer to the HBM roofline? A stripped copy of the
whole-row path of graphopt/fused/norm_act/triton_kernel.py (layer norm, affine, no residual) is timed in every
(block_m, num_warps) shape with each hint on and off, next to the shipped kernel and a device copy of
the same bytes, through the same CUPTI timer as bench/bench_kernels.py.

    python bench/probe_norm_act_hints.py [--out DIR]   # writes DIR/norm_act_hints.json
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton
import triton.language as tl

from bench.bench_kernels import GpuTimer, copies_needed, measure_copy_bandwidth
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config
from graphopt.kernels.row_norm import block_stats, load_affine, normalize_activate

ROWS = 16384
RESULTS = Path(__file__).resolve().parent / "results"


@triton.jit
def hinted_norm_act(
    X, W, B, Y, rows, cols, eps, activation,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVICT_FIRST: tl.constexpr, STREAM_STORE: tl.constexpr,
):  # fmt: skip
    offs = tl.arange(0, BLOCK_N)
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = offs < cols
    mask = (row < rows)[:, None] & col_ok[None, :]
    off = row[:, None] * cols + offs
    if EVICT_FIRST:
        x = tl.load(X + off, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    else:
        x = tl.load(X + off, mask=mask, other=0.0).to(tl.float32)
    first = tl.load(X + row * cols, mask=row < rows, other=0.0).to(tl.float32)
    centered, rstd = block_stats(x, first, mask, cols, 0, eps, False)
    scale, bias = load_affine(W, B, offs, col_ok, 1, 1)
    y = normalize_activate(centered, rstd, scale, bias, activation, Y.dtype.element_ty).to(Y.dtype.element_ty)
    if STREAM_STORE:
        tl.store(Y + off, y, mask=mask, cache_modifier=".cs")
    else:
        tl.store(Y + off, y, mask=mask)


def probe_cell(timer, bw, dtype, dim, act) -> dict:
    elem = torch.finfo(dtype).bits // 8
    nbytes = 2 * ROWS * dim * elem
    copies = copies_needed(nbytes)
    xs = [torch.randn(ROWS, dim, device="cuda", dtype=dtype) for _ in range(copies)]
    ys = [torch.empty_like(x) for x in xs]
    w, b = torch.randn(dim, device="cuda", dtype=dtype), torch.randn(dim, device="cuda", dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    cell = {"dtype": name, "D": dim, "act": act.name, "roofline_us": nbytes / bw * 1e6}
    cell["copy_us"] = timer([lambda i=i: ys[i].copy_(xs[i]) for i in range(copies)]).gpu_us

    def shipped(i):
        launch_norm_act(xs[i], w, b, None, ys[i], None, norm=Norm.LAYER, activation=act, eps=1e-5)

    cell["shipped_us"] = timer([lambda i=i: shipped(i) for i in range(copies)]).gpu_us
    cell["shipped_tier"] = norm_act_config(ROWS, dim, name).tier.name
    shipped(0)
    reference = ys[0].float().clone()
    variants, worst_difference = {}, 0.0
    shapes = [
        (block_m, warps, evict, stream)
        for block_m in (1, 2, 4, 8)
        for warps in (1, 2, 4, 8)
        if 4 <= block_m * dim // (32 * warps) <= 64
        for evict in (0, 1)
        for stream in (0, 1)
    ]
    for block_m, warps, evict, stream in shapes:
        launch = functools.partial(
            hinted_norm_act[(triton.cdiv(ROWS, block_m),)],
            rows=ROWS, cols=dim, eps=1e-5, activation=int(act), BLOCK_M=block_m, BLOCK_N=dim,
            EVICT_FIRST=evict, STREAM_STORE=stream, num_warps=warps,
        )  # fmt: skip
        calls = [functools.partial(launch, xs[i], w, b, ys[i]) for i in range(copies)]
        calls[0]()
        torch.cuda.synchronize()
        worst_difference = max(worst_difference, (ys[0].float() - reference).abs().max().item())
        variants[f"m{block_m}w{warps}e{evict}c{stream}"] = round(timer(calls).gpu_us, 2)
    cell["variants_us"] = variants
    cell["max_abs_difference_to_shipped"] = worst_difference
    return summarize(cell)


def summarize(cell: dict) -> dict:
    """Best time without hints, with each hint and with both, as ratios to the roofline."""
    variants, roof = cell["variants_us"], cell["roofline_us"]
    hints = (("plain", "e0c0"), ("evict_first", "e1c0"), ("stream_store", "e0c1"), ("both", "e1c1"))
    for label, suffix in hints:
        best = min((us, key) for key, us in variants.items() if key.endswith(suffix))
        cell[f"best_{label}"] = {"us": best[0], "shape": best[1], "ratio": round(best[0] / roof, 3)}
    cell["shipped_ratio"] = round(cell["shipped_us"] / roof, 3)
    cell["copy_ratio"] = round(cell["copy_us"] / roof, 3)
    return cell


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    timer = GpuTimer(reps=200, warmup=20)
    bw = measure_copy_bandwidth(timer, 1 << 30)
    record = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": ROWS,
        "copy_bandwidth_TBps": bw / 1e12,
        "cells": [
            probe_cell(timer, bw, dtype, dim, act)
            for dtype in (torch.bfloat16, torch.float32)
            for dim in (256, 1024)
            for act in (Activation.GELU, Activation.TANH)
        ],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "norm_act_hints.json").write_text(json.dumps(record, indent=1) + "\n")
    for cell in record["cells"]:
        print(
            f"{cell['dtype']:>8} D={cell['D']:<5} {cell['act']:<5} shipped {cell['shipped_ratio']:.2f}x  "
            f"copy {cell['copy_ratio']:.2f}x  best: plain {cell['best_plain']['ratio']:.2f}x  "
            f"evict_first {cell['best_evict_first']['ratio']:.2f}x  "
            f".cs {cell['best_stream_store']['ratio']:.2f}x  "
            f"both {cell['best_both']['ratio']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
