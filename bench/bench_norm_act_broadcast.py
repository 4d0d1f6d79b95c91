"""GPU benchmark of NormAct with operands broadcast over X's leading dims, against a device copy of
the same bytes (bench_kernels.py's timer, checks and roofline).

Run from the repository root on a machine with a CUDA GPU:

    PYTHONPATH=. python bench/bench_norm_act_broadcast.py [--quick] [--out bench/results]

Cases, fp32 and bf16, each beside the same shape with today's shared scale and full-size residual
(the fast path the broadcast branch must not slow down):
- per-slice scale and bias [N, 1, D] on X [N, B, D]: the per-feature split-stack model (N=128,
  B=1024, D=256) and a wider one (N=32, B=512, D=1024);
- a broadcast residual: DistilBERT's [1, T, D] position embedding on [batch, T, D] (8 x 512 x 768)
  and Whisper's [T, D] on [batch, T, D] (8 x 1500 x 512).
Every output is checked against the spec's float64 reference on a sample of rows first. Writes
OUT/norm_act_broadcast.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from bench.bench_kernels import (
    DTYPES,
    GpuTimer,
    check,
    copies_needed,
    f64,
    measure_copy_bandwidth,
    sample_rows,
)
from graphopt.fused import NORM_ACT, Activation, Norm
from graphopt.fused.broadcast_rows import row_broadcast
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config

# name: (X shape, scale/bias shape, residual shape or None)
CASES = {
    "per_slice_N128": ((128, 1024, 256), (128, 1, 256), None),
    "per_slice_N32_D1024": ((32, 512, 1024), (32, 1, 1024), None),
    "residual_1TD_distilbert": ((8, 512, 768), (768,), (1, 512, 768)),
    "residual_TD_whisper": ((8, 1500, 512), (512,), (1500, 512)),
}


def _baseline(x_shape, param_shape, residual_shape):
    """The same case with today's operands: a shared [D] scale and bias, a full-size residual."""
    return x_shape, (x_shape[-1],), None if residual_shape is None else x_shape


def bench_case(name, x_shape, param_shape, residual_shape, dtype_name, timer) -> dict:
    dtype = DTYPES[dtype_name]
    elem = torch.finfo(dtype).bits // 8
    cols = x_shape[-1]
    rows = x_shape[0] * x_shape[1]
    groups = row_broadcast(param_shape, x_shape, -1)
    r_rows = None if residual_shape is None else row_broadcast(residual_shape, x_shape, -1)
    param_elems = 2 * groups.groups * cols
    r_elems = 0 if r_rows is None else r_rows.groups * cols
    outputs = 1 if r_rows is None else 2
    nbytes = (rows * cols * (1 + outputs) + param_elems + r_elems) * elem
    copies = copies_needed(nbytes)
    xs = [torch.randn(x_shape, device="cuda", dtype=dtype) for _ in range(copies)]
    w = (1 + 0.3 * torch.randn(param_shape, device="cuda")).to(dtype)
    b = (0.3 * torch.randn(param_shape, device="cuda")).to(dtype)
    r = None if residual_shape is None else torch.randn(residual_shape, device="cuda", dtype=dtype)
    ys = [torch.full((rows, cols), float("nan"), device="cuda", dtype=dtype) for _ in range(copies)]
    ss = [torch.empty_like(y) for y in ys] if r is not None else [None] * copies

    def fused(i):
        launch_norm_act(
            xs[i].view(rows, cols), w.reshape(-1), b.reshape(-1), None if r is None else r.reshape(-1, cols),
            ys[i], ss[i], norm=Norm.LAYER, activation=Activation.GELU, eps=1e-5,
            scale_rows=groups, bias_rows=groups, residual_rows=r_rows,
        )  # fmt: skip

    # The same bytes moved by one device copy: the floor at this size.
    src = [torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda") for _ in range(copies)]
    dst = [torch.empty_like(s) for s in src]
    fused(0)
    torch.cuda.synchronize()
    idx = sample_rows(rows)
    x3 = f64(xs[0].view(x_shape[0], x_shape[1], cols))
    ref_sum = None
    if r is not None:
        ref_sum = f64((xs[0].float() + r.float()).to(dtype))
    ref, _ = NORM_ACT.reference(
        x3 if r is None else ref_sum,
        f64(w),
        f64(b),
        None,
        norm="layer",
        activation="gelu",
        epsilon=1e-5,
        axis=-1,
    )
    checks = {"fused": check(name, ys[0], ref.reshape(rows, cols)[idx.numpy()], dtype, idx)}
    fused_t = timer([lambda i=i: fused(i) for i in range(copies)])
    copy_t = timer([lambda i=i: dst[i].copy_(src[i]) for i in range(copies)])
    return {
        "case": name, "dtype": dtype_name, "x": list(x_shape), "scale_bias": list(param_shape),
        "residual": None if residual_shape is None else list(residual_shape), "bytes": nbytes,
        "tier": norm_act_config(rows, cols, dtype_name).tier.name,
        "fused_us": round(fused_t.gpu_us, 2), "copy_us": round(copy_t.gpu_us, 2),
        "ratio_vs_copy": round(fused_t.gpu_us / copy_t.gpu_us, 3), "checks": checks,
    }  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_norm_act_broadcast: no CUDA device found; this benchmark needs a GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    timer = GpuTimer(reps=30 if args.quick else 100, warmup=5 if args.quick else 20)
    bw = measure_copy_bandwidth(timer, 1024 * 2**20)
    print(f"device {torch.cuda.get_device_name(0)}; copy bandwidth {bw / 1e12:.2f} TB/s")
    cells = []
    for name, shapes in CASES.items():
        for dtype_name in DTYPES:
            for label, case in ((name, shapes), (name + "/baseline", _baseline(*shapes))):
                cell = bench_case(label, *case, dtype_name, timer)
                cells.append(cell)
                print(f"  {label} {dtype_name}: fused {cell['fused_us']:.1f} µs, "
                      f"copy {cell['copy_us']:.1f} µs, {cell['ratio_vs_copy']:.2f}x copy [{cell['tier']}]",
                      flush=True)  # fmt: skip
    ok = all(ch["ok"] for c in cells for ch in c["checks"].values())
    worst = max(c["ratio_vs_copy"] for c in cells if not c["case"].endswith("baseline"))
    summary = {"worst_broadcast_ratio_vs_copy": worst, "target": 1.10, "all_checks_ok": ok}
    meta = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "copy_TBps": round(bw / 1e12, 3),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "norm_act_broadcast.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "cells": cells}, indent=1)
    )
    lines = ["| case | dtype | fused µs | copy µs | ×copy | tier |", "|---|---|---|---|---|---|"]
    keys = ("case", "dtype", "fused_us", "copy_us", "ratio_vs_copy", "tier")
    lines += ["| " + " | ".join(str(c[k]) for k in keys) + " |" for c in cells]
    (args.out / "norm_act_broadcast.md").write_text(
        f"{meta}\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "\n".join(f"- {k}: {v}" for k, v in summary.items())
        + "\n"
    )
    print(summary)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
