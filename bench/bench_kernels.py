"""GPU benchmark of graphopt's fused Triton kernels against the HBM roofline.

Run from the repository root on a machine with a CUDA GPU:

    PYTHONPATH=. python bench/bench_kernels.py [--quick] [--out bench/results]

1. Measures device-to-device copy bandwidth: the roofline is bytes read + written / that bandwidth.
2. NormAct (LayerNorm with affine + activation), rows=16384, D in {256, 1024, 4096, 8192}, fp32 and
   bf16, gelu and tanh: eager PyTorch, torch.compile of the same module, and the fused kernel.
3. NormActLinear on the seed shape (rows=16384, D=256, K=1, layer norm without affine, eps=0,
   tanh, out relu), and a sweep of K comparing the fused kernel with NormAct + cuBLAS linear, to
   pick the width above which the matmul should stay with cuBLAS.

Every implementation is checked against the float64 reference of each fused op's spec (on a
sample of rows) before it is timed, and the fused outputs are NaN-poisoned first so an unwritten
element fails the check. Times are medians of single calls measured with CUDA events; a sleep
kernel queued before each call keeps the GPU busy while the CPU launches, so CPU overhead is not
counted, and inputs rotate through enough copies that L2 never holds the next call's data.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear, norm_act_linear_config

ROWS = 16384
DIMS = (256, 1024, 4096, 8192)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ACTIVATIONS = {"gelu": (Activation.GELU, nn.GELU), "tanh": (Activation.TANH, nn.Tanh)}
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}
SWEEP_K = (1, 4, 16, 64)
TARGET_RATIO = 1.15  # fused NormAct GPU time / roofline


# ----------------------------------------------------------------------------------------------
# timing


@dataclass
class Timing:
    gpu_us: float  # kernel execution time per call (CUPTI, through torch.profiler), mean
    call_us: float  # CUDA events around one call, median: adds the device-side launch latency


class GpuTimer:
    """GPU time of one call, CPU launch overhead excluded (see the module docstring)."""

    def __init__(self, reps: int, warmup: int, pad_us: float = 300.0):
        self.reps, self.warmup = reps, warmup
        self.sleep_cycles = self._cycles_for(pad_us)

    @staticmethod
    def _cycles_for(us: float) -> int:
        probe = 10_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(probe // 10)  # wake the clocks up
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        torch.cuda.synchronize()
        cycles_per_us = probe / (start.elapsed_time(end) * 1e3)
        return int(us * cycles_per_us)

    def events_us(self, calls) -> float:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            torch.cuda._sleep(self.sleep_cycles)
            starts[i].record()
            calls[i % len(calls)]()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True))

    def kernels_us(self, calls) -> float:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(self.reps):
                calls[i % len(calls)]()
            torch.cuda.synchronize()
        total = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
        return total / self.reps

    def __call__(self, calls) -> Timing:
        """``calls``: zero-argument callables on distinct inputs, used in turn."""
        for i in range(self.warmup):
            calls[i % len(calls)]()
        torch.cuda.synchronize()
        return Timing(gpu_us=self.kernels_us(calls), call_us=self.events_us(calls))


def l2_bytes() -> int:
    props = torch.cuda.get_device_properties(0)
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


def copies_needed(bytes_per_call: int) -> int:
    """Input sets to rotate through so that, together, they exceed L2 several times over."""
    return max(2, min(64, math.ceil(4 * l2_bytes() / max(bytes_per_call, 1))))


def measure_copy_bandwidth(timer: GpuTimer, nbytes: int) -> float:
    """Bytes per second of a device-to-device copy (read + write counted)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    return 2 * nbytes / (timer([lambda: dst.copy_(src)]).gpu_us * 1e-6)


# ----------------------------------------------------------------------------------------------
# correctness


def relative_error(out: torch.Tensor, ref: np.ndarray) -> tuple[float, float]:
    """(‖out − ref‖ / ‖ref‖, max |out − ref| / max |ref|) in float64."""
    out64 = out.detach().double().cpu().numpy()
    denom = max(float(np.linalg.norm(ref)), 1e-300)
    rel = float(np.linalg.norm(out64 - ref)) / denom
    max_rel = float(np.abs(out64 - ref).max()) / max(float(np.abs(ref).max()), 1e-300)
    return rel, max_rel


def sample_rows(rows: int, count: int = 64) -> torch.Tensor:
    """Row indices spread over the tensor, always including the first and last row."""
    return torch.unique(torch.linspace(0, rows - 1, count).round().long())


def check(name: str, out: torch.Tensor, ref: np.ndarray, dtype: torch.dtype, idx: torch.Tensor) -> dict:
    finite = bool(torch.isfinite(out).all())
    rel, max_rel = relative_error(out[idx.to(out.device)], ref)
    tol = TOLERANCE[dtype]
    ok = finite and rel <= tol and max_rel <= 10 * tol
    if not ok:
        print(f"  CHECK FAILED {name}: finite={finite} rel={rel:.2e} max_rel={max_rel:.2e} (tol {tol:g})")
    return {"ok": ok, "rel_err": rel, "max_rel_err": max_rel}


def f64(t: torch.Tensor | None):
    return None if t is None else t.detach().double().cpu().numpy()


# ----------------------------------------------------------------------------------------------
# cells


@dataclass
class Cell:
    op: str
    dtype: str
    dim: int
    activation: str
    k: int = 0
    bytes_moved: int = 0
    roofline_us: float = 0.0
    times_us: dict = field(default_factory=dict)  # GPU (kernel) time per call
    call_us: dict = field(default_factory=dict)  # event time around one call
    checks: dict = field(default_factory=dict)
    config: str = ""

    def ratio(self, impl: str = "fused") -> float:
        t = self.times_us.get(impl)
        return t / self.roofline_us if t and self.roofline_us else float("nan")


def try_compile(module: nn.Module, sample: torch.Tensor):
    # A fresh start per cell: otherwise later shapes hit dynamo's recompile limit (and run eager) or
    # get compiled with dynamic shapes.
    torch._dynamo.reset()
    try:
        compiled = torch.compile(module)
        with torch.no_grad():
            compiled(sample)
        return compiled
    except Exception as exc:  # the comparison is still useful without this column
        print(f"  torch.compile failed ({type(exc).__name__}: {exc}); skipping that column")
        return None


def bench_norm_act(dim, dtype_name, act_name, timer, bw, use_compile, rows=ROWS) -> Cell:
    dtype = DTYPES[dtype_name]
    act_code, act_module = ACTIVATIONS[act_name]
    elem = torch.finfo(dtype).bits // 8
    cell = Cell("NormAct", dtype_name, dim, act_name)
    cell.bytes_moved = 2 * rows * dim * elem + 2 * dim * elem
    cell.roofline_us = cell.bytes_moved / bw * 1e6
    module = nn.Sequential(nn.LayerNorm(dim, eps=1e-5), act_module()).to("cuda", dtype)
    with torch.no_grad():
        module[0].weight.normal_(1.0, 0.2)
        module[0].bias.normal_(0.0, 0.2)
    scale, bias = module[0].weight.detach(), module[0].bias.detach()
    copies = copies_needed(cell.bytes_moved)
    xs = [torch.randn(rows, dim, device="cuda", dtype=dtype) * 2 + 0.5 for _ in range(copies)]
    ys = [torch.full_like(x, float("nan")) for x in xs]
    config = norm_act_config(rows, dim, dtype_name)
    cell.config = config.tier.name

    idx = sample_rows(rows)
    ref, _ = NORM_ACT.reference(
        f64(xs[0][idx]), f64(scale), f64(bias), None,
        norm="layer", activation=act_code.attr, epsilon=1e-5, axis=-1,
    )  # fmt: skip

    def fused(i):
        launch_norm_act(xs[i], scale, bias, None, ys[i], None, norm=Norm.LAYER, activation=act_code, eps=1e-5)

    # A plain copy of X into Y moves exactly the bytes NormAct moves: the floor a kernel can reach
    # at this size, which for short rows sits visibly above the bandwidth roofline.
    impls = {"copy": lambda i: ys[i].copy_(xs[i]), "eager": lambda i: module(xs[i]), "fused": fused}
    compiled = try_compile(module, xs[0]) if use_compile else None
    if compiled is not None:
        impls["compile"] = lambda i: compiled(xs[i])
    with torch.no_grad():
        fused(0)
        torch.cuda.synchronize()
        cell.checks["fused"] = check("fused", ys[0], ref, dtype, idx)
        cell.checks["eager"] = check("eager", module(xs[0]), ref, dtype, idx)
        if compiled is not None:
            cell.checks["compile"] = check("compile", compiled(xs[0]), ref, dtype, idx)
        for name, impl in impls.items():
            timing = timer([lambda i=i, impl=impl: impl(i) for i in range(copies)])
            cell.times_us[name], cell.call_us[name] = timing.gpu_us, timing.call_us
    return cell


class LinearHead(nn.Module):
    """The unfused NormActLinear: LayerNorm (no affine) → act → Linear → out act."""

    def __init__(self, dim: int, k: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.linear = nn.Linear(dim, k)

    def forward(self, x):
        return F.relu(self.linear(torch.tanh(self.norm(x))))


def bench_norm_act_linear(dim, k, dtype_name, timer, bw, use_compile, rows=ROWS, split=False) -> Cell:
    """The seed NormActLinear (tanh, out relu, eps=0, no affine); ``split`` adds the path that keeps
    the matmul in cuBLAS: fused NormAct, then F.linear, then relu."""
    dtype = DTYPES[dtype_name]
    elem = torch.finfo(dtype).bits // 8
    eps = 0.0
    cell = Cell("NormActLinear", dtype_name, dim, "tanh/relu", k=k)
    cell.bytes_moved = rows * dim * elem + rows * k * elem + k * dim * elem + k * elem
    cell.roofline_us = cell.bytes_moved / bw * 1e6
    module = LinearHead(dim, k, eps).to("cuda", dtype)
    weight, lbias = module.linear.weight.detach(), module.linear.bias.detach()
    copies = copies_needed(cell.bytes_moved)
    # Rows with a visible spread: eps = 0 divides by the standard deviation.
    xs = [torch.randn(rows, dim, device="cuda", dtype=dtype) for _ in range(copies)]
    ys = [torch.full((rows, k), float("nan"), device="cuda", dtype=dtype) for _ in range(copies)]
    hidden = [torch.empty_like(x) for x in xs]
    cell.config = norm_act_linear_config(rows, dim, dtype_name, uniform=0).tier.name

    idx = sample_rows(rows)
    ref = NORM_ACT_LINEAR.reference(
        f64(xs[0][idx]), None, None, f64(weight), f64(lbias),
        norm="layer", activation="tanh", epsilon=eps, out_activation="relu",
    )  # fmt: skip

    def fused(i):
        launch_norm_act_linear(
            xs[i], None, None, weight, lbias, ys[i], norm=Norm.LAYER, activation=Activation.TANH,
            out_activation=Activation.RELU, eps=eps,
        )  # fmt: skip

    def split_path(i):
        launch_norm_act(xs[i], None, None, None, hidden[i], None, norm=Norm.LAYER,
                        activation=Activation.TANH, eps=eps)  # fmt: skip
        return F.relu(F.linear(hidden[i], weight, lbias))

    impls = {"eager": lambda i: module(xs[i]), "fused": fused}
    if split:
        impls["split"] = split_path
    compiled = try_compile(module, xs[0]) if use_compile else None
    if compiled is not None:
        impls["compile"] = lambda i: compiled(xs[i])
    with torch.no_grad():
        fused(0)
        torch.cuda.synchronize()
        cell.checks["fused"] = check("fused", ys[0], ref, dtype, idx)
        cell.checks["eager"] = check("eager", module(xs[0]), ref, dtype, idx)
        if split:
            cell.checks["split"] = check("split", split_path(0), ref, dtype, idx)
        if compiled is not None:
            cell.checks["compile"] = check("compile", compiled(xs[0]), ref, dtype, idx)
        for name, impl in impls.items():
            timing = timer([lambda i=i, impl=impl: impl(i) for i in range(copies)])
            cell.times_us[name], cell.call_us[name] = timing.gpu_us, timing.call_us
    return cell


# ----------------------------------------------------------------------------------------------
# reporting


def row_text(cell: Cell) -> list[str]:
    t = cell.times_us
    fmt = lambda v: f"{v:.1f}" if v is not None else "-"  # noqa: E731
    ok = all(c["ok"] for c in cell.checks.values())
    vs_copy = f"{t['fused'] / t['copy']:.2f}" if "copy" in t else "-"
    return [
        cell.op, cell.dtype, str(cell.dim), str(cell.k or ""), cell.activation,
        f"{cell.roofline_us:.1f}", fmt(t.get("copy")), fmt(t.get("eager")), fmt(t.get("compile")),
        fmt(t.get("split")), fmt(t.get("fused")), f"{cell.ratio():.2f}", vs_copy, cell.config,
        "ok" if ok else "FAIL",
    ]  # fmt: skip


HEADER = ["op", "dtype", "D", "K", "act", "roofline", "copy", "eager", "compile", "split", "fused",
          "fused/roof", "fused/copy", "config", "check"]  # fmt: skip


def markdown(cells: list[Cell], meta: dict) -> str:
    lines = [f"# Kernel benchmark ({meta['device']})", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "GPU (kernel) µs per call; roofline = bytes moved / copy bandwidth; copy = a device copy",
              "of the same bytes (NormAct only).", ""]  # fmt: skip
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    lines += ["| " + " | ".join(row_text(c)) + " |" for c in cells]
    return "\n".join(lines) + "\n"


def text_table(cells: list[Cell]) -> str:
    rows = [HEADER] + [row_text(c) for c in cells]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows)


def k_threshold(sweep: list[Cell]) -> int | None:
    """The smallest K at which NormAct + cuBLAS beats the fused kernel (None: fused always wins)."""
    for cell in sorted(sweep, key=lambda c: c.k):
        if cell.times_us.get("split", math.inf) < cell.times_us["fused"]:
            return cell.k
    return None


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="where JSON + markdown go")
    parser.add_argument("--quick", action="store_true", help="a subset with fewer repetitions (< 2 min)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_kernels: no CUDA device found; this benchmark needs a GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    t0 = time.time()
    timer = GpuTimer(reps=30 if args.quick else 100, warmup=5 if args.quick else 20)
    bw = measure_copy_bandwidth(timer, (512 if args.quick else 2048) * 2**20)
    meta = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "rows": ROWS,
        "copy_bandwidth_TBps": round(bw / 1e12, 3),
        "quick": args.quick,
    }
    print(f"device {meta['device']}; copy bandwidth {bw / 1e12:.2f} TB/s (the roofline)")
    use_compile = not args.no_compile
    dims = (1024, 8192) if args.quick else DIMS
    acts = ("gelu",) if args.quick else tuple(ACTIVATIONS)

    cells: list[Cell] = []
    for dtype_name in DTYPES:
        for dim in dims:
            for act in acts:
                cell = bench_norm_act(dim, dtype_name, act, timer, bw, use_compile)
                cells.append(cell)
                t = cell.times_us
                print(f"  NormAct {dtype_name} D={dim} {act}: fused {t['fused']:.1f} µs "
                      f"= {cell.ratio():.2f}x roofline ({cell.roofline_us:.1f} µs), copy {t['copy']:.1f} µs, "
                      f"compile {t.get('compile', math.nan):.1f} µs", flush=True)  # fmt: skip

    seed = bench_norm_act_linear(256, 1, "float32", timer, bw, use_compile)
    cells.append(seed)
    print(f"  NormActLinear seed: fused {seed.times_us['fused']:.1f} µs (goal 8.5)", flush=True)
    sweep = []
    for k in SWEEP_K:
        for dtype_name in ("float32",) if args.quick else DTYPES:
            cell = bench_norm_act_linear(256, k, dtype_name, timer, bw, use_compile=False, split=True)
            sweep.append(cell)
            print(f"  K sweep {dtype_name} K={k}: fused {cell.times_us['fused']:.1f} µs, "
                  f"NormAct+cuBLAS {cell.times_us['split']:.1f} µs", flush=True)  # fmt: skip
    cells += sweep

    norm_act_cells = [c for c in cells if c.op == "NormAct"]
    worst = max(c.ratio() for c in norm_act_cells)
    worst_vs_copy = max(c.times_us["fused"] / c.times_us["copy"] for c in norm_act_cells)
    threshold = {d: k_threshold([c for c in sweep if c.dtype == d]) for d in {c.dtype for c in sweep}}
    summary = {
        "norm_act_worst_ratio": round(worst, 3),
        "norm_act_target_ratio": TARGET_RATIO,
        "norm_act_target_met": worst <= TARGET_RATIO,
        "norm_act_worst_ratio_vs_copy": round(worst_vs_copy, 3),
        "seed_norm_act_linear_us": round(seed.times_us["fused"], 2),
        "seed_goal_us": 8.5,
        "cublas_from_k": threshold,
        "all_checks_ok": all(ch["ok"] for c in cells for ch in c.checks.values()),
        "seconds": round(time.time() - t0, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "kernels_quick" if args.quick else "kernels"
    (args.out / f"{stem}.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "cells": [asdict(c) for c in cells]}, indent=1)
    )
    (args.out / f"{stem}.md").write_text(
        markdown(cells, meta) + "\n" + "\n".join(f"- {k}: {v}" for k, v in summary.items()) + "\n"
    )
    print()
    print(text_table(cells))
    print()
    for key, value in summary.items():
        print(f"{key}: {value}")
    print(f"wrote {args.out / stem}.json and .md")
    return 0 if summary["all_checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
