"""GPU benchmark of NormActLinear's residual and per-slice forms against a device copy of the same
bytes (bench_kernels.py's timer, checks and copy), each beside its baseline: the same shape with one
shared scale, bias and weight and no residual (the code path the new branches must not slow down).

Run from the repository root on a machine with a CUDA GPU:

    PYTHONPATH=. python bench/bench_norm_act_linear_forms.py [--quick] [--out bench/results]

Cases, fp32, bf16 and fp16:
- the per-feature model after batching (N=128, B=1024, D=256): per-slice LayerNorm scale and bias
  [N, 1, D] with a shared Linear(D, 1), and with per-feature Linear(D, 4) weights [N, 4, D] and
  biases [N, 1, 4];
- residual → norm → act → Linear(D, 4) on 4096 rows of D = 1024 and 4096, the sum written (later
  layers read it) and not, and with DistilBERT's [1, T, D] position embedding as the residual.
Every output is checked against the spec's float64 reference on a sample of rows first. Writes
OUT/norm_act_linear_forms.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from bench.bench_kernels import GpuTimer, check, copies_needed, f64, measure_copy_bandwidth, sample_rows
from graphopt.fused import NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.broadcast_rows import row_broadcast
from graphopt.fused.norm_act_linear.spec import weight_rows
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear, norm_act_linear_config
from graphopt.kernels.launch_rules import uniform_rows

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# name: X, scale/bias, weight, linear bias, residual (None: absent), whether the sum is written
CASES = {
    "per_feature_norms_N128": ((128, 1024, 256), (128, 1, 256), (1, 256), (1,), None, False),
    "per_feature_linear4_N128": ((128, 1024, 256), (128, 1, 256), (128, 4, 256), (128, 1, 4), None, False),
    "residual_D1024_K4": ((4096, 1024), (1024,), (4, 1024), (4,), (4096, 1024), True),
    "residual_D1024_K4_sum_unread": ((4096, 1024), (1024,), (4, 1024), (4,), (4096, 1024), False),
    "residual_D4096_K4": ((4096, 4096), (4096,), (4, 4096), (4,), (4096, 4096), True),
    "residual_1TD_K4_distilbert": ((8, 512, 768), (768,), (4, 768), (4,), (1, 512, 768), True),
}


def _baseline(x, param, weight, linear_bias, residual, write_sum):
    """The same X with today's operands: shared [D] scale and bias, one [K, D] weight, no residual."""
    return x, (x[-1],), weight[-2:], (weight[-2],), None, False


def _rows_of(shape, against):
    return row_broadcast(shape, against, -1)


def _per_row(t, rows, idx):
    """The rows of operand ``t`` (viewed as [groups, ...]) that X's rows ``idx`` read."""
    inner, groups = rows
    return t.reshape(groups, -1)[(idx // inner) % groups]


def bench_case(name, x_shape, param, weight_shape, lb_shape, residual_shape, write_sum, dtype_name, timer):
    dtype = DTYPES[dtype_name]
    elem = torch.finfo(dtype).bits // 8
    d, k = x_shape[-1], weight_shape[-2]
    rows = math.prod(x_shape[:-1])
    y_shape = (*x_shape[:-1], k)
    p_rows, w_rows = _rows_of(param, x_shape), weight_rows(weight_shape, x_shape)
    lb_rows = _rows_of(lb_shape, y_shape)
    r_rows = None if residual_shape is None else _rows_of(residual_shape, x_shape)
    moved = rows * d + rows * k + 2 * p_rows.groups * d + w_rows.groups * k * d + lb_rows.groups * k
    moved += 0 if r_rows is None else r_rows.groups * d + (rows * d if write_sum else 0)
    nbytes = moved * elem
    copies = copies_needed(nbytes)
    xs = [torch.randn(rows, d, device="cuda", dtype=dtype) for _ in range(copies)]
    w = (1 + 0.3 * torch.randn(param, device="cuda")).to(dtype)
    b = (0.3 * torch.randn(param, device="cuda")).to(dtype)
    lw = (torch.randn(weight_shape, device="cuda") / d**0.5).to(dtype)
    lb = (0.3 * torch.randn(lb_shape, device="cuda")).to(dtype)
    r = None if residual_shape is None else torch.randn(residual_shape, device="cuda", dtype=dtype)
    ys = [torch.full((rows, k), float("nan"), device="cuda", dtype=dtype) for _ in range(copies)]
    ss = [torch.empty(rows, d, device="cuda", dtype=dtype) if write_sum else None for _ in range(copies)]
    weight2d = lw if w_rows.groups == 1 else lw.reshape(-1, k, d)

    def fused(i):
        launch_norm_act_linear(
            xs[i], w.reshape(-1), b.reshape(-1), weight2d.reshape(-1, d) if w_rows.groups == 1 else weight2d,
            lb.reshape(-1), ys[i], norm=Norm.LAYER, activation=Activation.GELU,
            out_activation=Activation.IDENTITY, eps=1e-5,
            residual2d=None if r is None else r.reshape(-1, d), residual_sum=ss[i],
            scale_rows=p_rows, bias_rows=p_rows, residual_rows=r_rows, weight_rows=w_rows,
            linear_bias_rows=lb_rows,
        )  # fmt: skip

    # The same bytes moved by one device copy: the floor at this size.
    src = [torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda") for _ in range(copies)]
    dst = [torch.empty_like(s) for s in src]
    fused(0)
    torch.cuda.synchronize()
    idx = sample_rows(rows)
    x_rows = xs[0][idx.cuda()]
    if r is not None:
        x_rows = (x_rows.float() + _per_row(r, r_rows, idx.cuda()).float()).to(dtype)
    # Each sampled row as a slice of its own: [S, 1, D] with its operands' rows [S, 1, ...].
    at = idx.cuda()
    ref = NORM_ACT_LINEAR.reference(
        f64(x_rows)[:, None], f64(_per_row(w, p_rows, at))[:, None], f64(_per_row(b, p_rows, at))[:, None],
        f64(_per_row(lw, w_rows, at).reshape(-1, k, d)), f64(_per_row(lb, lb_rows, at))[:, None],
        norm="layer", activation="gelu", epsilon=1e-5, out_activation="identity",
    )[:, 0]  # fmt: skip
    checks = {"fused": check(name, ys[0], ref, dtype, idx)}
    if write_sum:
        checks["sum"] = check(name + " sum", ss[0], f64(x_rows), dtype, idx)
    fused_t = timer([lambda i=i: fused(i) for i in range(copies)])
    copy_t = timer([lambda i=i: dst[i].copy_(src[i]) for i in range(copies)])
    return {
        "case": name, "dtype": dtype_name, "x": list(x_shape), "scale_bias": list(param),
        "weight": list(weight_shape), "linear_bias": list(lb_shape),
        "residual": None if residual_shape is None else list(residual_shape), "sum_written": write_sum,
        "bytes": nbytes,
        "tier": norm_act_linear_config(
            rows, d, dtype_name, uniform=uniform_rows(p_rows, p_rows, w_rows, lb_rows)
        ).tier.name,
        "fused_us": round(fused_t.gpu_us, 2), "copy_us": round(copy_t.gpu_us, 2),
        "ratio_vs_copy": round(fused_t.gpu_us / copy_t.gpu_us, 3), "checks": checks,
    }  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "bench_norm_act_linear_forms: no CUDA device found; this benchmark needs a GPU", file=sys.stderr
        )
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
    summary = {"worst_ratio_vs_copy": worst, "target": 1.10, "all_checks_ok": ok}
    meta = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "copy_TBps": round(bw / 1e12, 3),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "norm_act_linear_forms.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "cells": cells}, indent=1)
    )
    lines = ["| case | dtype | fused µs | copy µs | ×copy | tier |", "|---|---|---|---|---|---|"]
    keys = ("case", "dtype", "fused_us", "copy_us", "ratio_vs_copy", "tier")
    lines += ["| " + " | ".join(str(c[key]) for key in keys) + " |" for c in cells]
    summary_lines = "\n".join(f"- {key}: {value}" for key, value in summary.items())
    (args.out / "norm_act_linear_forms.md").write_text(
        f"{meta}\n\n" + "\n".join(lines) + "\n\n" + summary_lines + "\n"
    )
    print(summary)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
