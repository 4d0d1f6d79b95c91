"""Probe on a GPU: which launch shape brings NormAct on short rows (D = 256, 1024) closest to the HBM
roofline, and how close can any kernel get at all?

Three families of kernels, each timed in several shapes through the CUPTI timer of
bench/bench_kernels.py, next to the shipped kernel:

- copies (the floor): a device copy of the same bytes (cudaMemcpy), and Triton copy kernels in the
  same block shapes as the norm kernels, one row block per program or persistent;
- ``wave``: one row block per program, larger blocks than the shipped tiers, so that the whole
  tensor is in flight in one wave of programs;
- ``persistent``: a few programs per multiprocessor walk the row blocks with a stride of the grid,
  their loads software-pipelined ``stages`` deep (asynchronous copies into shared memory);
- ``tma``: the same, loading and storing through tensor descriptors (Hopper's bulk copy engine).

Every variant's output is compared with the shipped kernel's before it is timed.

    python bench/probe_short_rows.py [--out DIR] [--quick]   # writes DIR/short_rows.json
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
from graphopt.kernels.activations import _gelu_bf16, _gelu_fp16, apply_activation
from graphopt.kernels.ptx import bf16_to_f32, tanh_approx, widen
from graphopt.kernels.row_norm import block_stats, load_affine, normalize_activate

ROWS = 16384
RESULTS = Path(__file__).resolve().parent / "results"


@triton.jit
def copy_blocks(X, Y, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (row < rows)[:, None] & (offs < cols)[None, :]
    off = row[:, None] * cols + offs
    tl.store(Y + off, tl.load(X + off, mask=mask), mask=mask)


@triton.jit
def copy_persistent(
    X, Y, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr
):  # fmt: skip
    offs = tl.arange(0, BLOCK_N)
    blocks = tl.cdiv(rows, BLOCK_M)
    for block in tl.range(tl.program_id(0), blocks, tl.num_programs(0), num_stages=STAGES):
        row = block * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        mask = (row < rows)[:, None] & (offs < cols)[None, :]
        off = row[:, None] * cols + offs
        tl.store(Y + off, tl.load(X + off, mask=mask), mask=mask)


@triton.jit
def _norm_block(x, mask, col_ok, scale, bias, cols, eps, activation, storage: tl.constexpr):
    # Statistics around 0, not the row's first element: these probes time the memory side, and
    # the TMA form has no pointer to load a first element from.
    centered, rstd = block_stats(x, tl.zeros([x.shape[0]], tl.float32), mask, cols, 0, eps, False)
    return normalize_activate(centered, rstd, scale, bias, activation, storage)


@triton.jit
def norm_act_wave(
    X, W, B, Y, rows, cols, eps, activation, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):  # fmt: skip
    offs = tl.arange(0, BLOCK_N)
    col_ok = offs < cols
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (row < rows)[:, None] & col_ok[None, :]
    off = row[:, None] * cols + offs
    x = tl.load(X + off, mask=mask, other=0.0).to(tl.float32)
    scale, bias = load_affine(W, B, offs, col_ok, 1, 1)
    y = _norm_block(x, mask, col_ok, scale, bias, cols, eps, activation, Y.dtype.element_ty)
    tl.store(Y + off, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def norm_act_persistent(
    X, W, B, Y, rows, cols, eps, activation,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    offs = tl.arange(0, BLOCK_N)
    col_ok = offs < cols
    scale, bias = load_affine(W, B, offs, col_ok, 1, 1)
    blocks = tl.cdiv(rows, BLOCK_M)
    for block in tl.range(tl.program_id(0), blocks, tl.num_programs(0), num_stages=STAGES):
        row = block * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        mask = (row < rows)[:, None] & col_ok[None, :]
        off = row[:, None] * cols + offs
        x = tl.load(X + off, mask=mask, other=0.0).to(tl.float32)
        y = _norm_block(x, mask, col_ok, scale, bias, cols, eps, activation, Y.dtype.element_ty)
        tl.store(Y + off, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def norm_act_tma(
    X, W, B, Y, rows, eps, activation,
    COLS: tl.constexpr, BLOCK_M: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """Whole rows of exactly COLS (<= 256) elements through tensor descriptors: rows past the end
    load as zeros and are not stored."""
    x_desc = tl.make_tensor_descriptor(X, shape=[rows, COLS], strides=[COLS, 1], block_shape=[BLOCK_M, COLS])
    y_desc = tl.make_tensor_descriptor(Y, shape=[rows, COLS], strides=[COLS, 1], block_shape=[BLOCK_M, COLS])
    offs = tl.arange(0, COLS)
    col_ok = offs < COLS
    mask = (tl.arange(0, BLOCK_M) >= 0)[:, None] & col_ok[None, :]
    scale, bias = load_affine(W, B, offs, col_ok, 1, 1)
    blocks = tl.cdiv(rows, BLOCK_M)
    for block in tl.range(tl.program_id(0), blocks, tl.num_programs(0), num_stages=STAGES):
        x = x_desc.load([block * BLOCK_M, 0]).to(tl.float32)
        y = _norm_block(x, mask, col_ok, scale, bias, COLS, eps, activation, Y.dtype.element_ty)
        y_desc.store([block * BLOCK_M, 0], y.to(Y.dtype.element_ty))


@triton.jit
def norm_act_lean(
    X, W, B, Y, rows, cols, eps, activation,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, FORM: tl.constexpr, UNPACK: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    offs = tl.arange(0, BLOCK_N)
    col_ok = offs < cols
    row = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    if EVEN:  # every column is real: only rows are masked, and stats need no select
        mask = (row < rows)[:, None] & (offs < BLOCK_N)[None, :]
    else:
        mask = (row < rows)[:, None] & col_ok[None, :]
    off = row[:, None] * cols + offs
    raw = tl.load(X + off, mask=mask, other=0.0)
    if UNPACK:
        x = bf16_to_f32(raw)
        scale = bf16_to_f32(tl.load(W + offs, mask=col_ok, other=1.0))
        bias = bf16_to_f32(tl.load(B + offs, mask=col_ok, other=0.0))
    else:
        x = raw.to(tl.float32)
        scale, bias = load_affine(W, B, offs, col_ok, 1, 1)
    if EVEN:
        shift = tl.sum(x, axis=1) / BLOCK_N
        centered = x - shift[:, None]
        rstd = 1.0 / tl.sqrt_rn(tl.sum(centered * centered, axis=1) / BLOCK_N + eps)
    else:
        centered, rstd = block_stats(x, tl.zeros([BLOCK_M], tl.float32), mask, cols, 0, eps, False)
    y = centered * rstd[:, None] * scale[None, :] + bias[None, :]
    if FORM == 0:
        y = apply_activation(y, activation, Y.dtype.element_ty)
    elif FORM == 1:
        y = _gelu_fp16(y)
    elif FORM == 4:
        y = tanh_approx(y)
    elif FORM == 6:
        y = _gelu_bf16(y)
    tl.store(Y + off, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def norm_act_rowwarp(
    X, W, B, Y, rows, eps, activation,
    BLOCK_M: tl.constexpr, COLS: tl.constexpr, CHUNK: tl.constexpr,
):  # fmt: skip
    """Whole rows of exactly COLS elements held as [COLS / CHUNK, BLOCK_M, CHUNK] tiles, CHUNK being
    one warp's span of 16-byte vectors: the default layout then gives each warp whole rows, so the
    row sums need no exchange between warps (no shared memory, no barrier)."""
    CHUNKS: tl.constexpr = COLS // CHUNK
    col = tl.arange(0, CHUNKS)[:, None, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
    row = (tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M))[None, :, None]
    mask = (row < rows) & (col < COLS)
    off = row * COLS + col
    x = widen(tl.load(X + off, mask=mask, other=0.0))
    # Loaded in the tile's own shape (every row its copy, from L1), so that they share its layout.
    tile_col = col + row * 0
    scale = widen(tl.load(W + tile_col))
    bias = widen(tl.load(B + tile_col))
    mean = tl.sum(tl.sum(x, axis=2), axis=0) * (1.0 / COLS)
    centered = x - mean[None, :, None]
    rstd = tl.math.rsqrt(tl.sum(tl.sum(centered * centered, axis=2), axis=0) * (1.0 / COLS) + eps)
    y = centered * rstd[None, :, None] * scale + bias
    y = apply_activation(y, activation, Y.dtype.element_ty)
    tl.store(Y + off, y.to(Y.dtype.element_ty), mask=mask)


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def variants(dim: int, elem: int, quick: bool) -> list[tuple[str, str, dict]]:
    """(family, name, launch parameters) for one row length; shapes keep 4..64 values per thread."""

    def per_thread(m, w):
        return m * dim // (32 * w)

    waves = [(m, w) for m in (1, 2, 4, 8, 16, 32, 64) for w in (1, 2, 4, 8) if 8 <= per_thread(m, w) <= 64]
    out = [("wave", f"wave_m{m}w{w}", {"m": m, "w": w}) for m, w in waves]
    persistent = [(m, w) for m in (1, 2, 4, 8, 16) for w in (1, 2, 4, 8) if 8 <= per_thread(m, w) <= 32]
    for m, w in persistent:
        for stages in (1, 2, 4) if not quick else (1, 3):
            for warps_per_sm in (16, 32, 64):  # programs per multiprocessor x warps per program
                ctas = warps_per_sm // w
                if ctas < 1 or stages * m * dim * elem * ctas > 200 * 1024:
                    continue
                out.append(
                    ("persistent", f"pers_m{m}w{w}s{stages}c{ctas}", {"m": m, "w": w, "s": stages, "c": ctas})
                )
    if dim <= 256:
        for m, w in ((8, 1), (16, 2), (16, 4), (32, 4)):
            for stages in (2, 4):
                for ctas in (1, 2, 4):
                    if stages * m * dim * elem * ctas <= 200 * 1024:
                        out.append(
                            ("tma", f"tma_m{m}w{w}s{stages}c{ctas}", {"m": m, "w": w, "s": stages, "c": ctas})
                        )
    for m, w in ((2, 1), (4, 1), (8, 2), (16, 4), (32, 8)):
        if per_thread(m, w) >= 4:
            out.append(("copy", f"copy_m{m}w{w}", {"m": m, "w": w}))
    for m, w, stages, ctas in ((4, 1, 1, 16), (4, 1, 3, 16), (16, 4, 1, 4), (16, 4, 3, 4), (8, 2, 4, 8)):
        if per_thread(m, w) >= 4 and stages * m * dim * elem * ctas <= 200 * 1024:
            out.append(
                ("copy", f"copy_pers_m{m}w{w}s{stages}c{ctas}", {"m": m, "w": w, "s": stages, "c": ctas})
            )
    return out


def launcher(family: str, p: dict, dim: int, act: int):
    blocks = triton.cdiv(ROWS, p["m"])
    grid = (min(blocks, _sms() * p.get("c", 0)),) if "c" in p else (blocks,)
    common = {"BLOCK_M": p["m"], "num_warps": p["w"]}
    if family == "wave":
        kernel = norm_act_wave[grid]
        return lambda x, w, b, y: kernel(
            x, w, b, y, ROWS, dim, 1e-5, act, BLOCK_N=dim, **common
        )  # fmt: skip
    if family == "persistent":
        kernel = norm_act_persistent[grid]
        return lambda x, w, b, y: kernel(
            x, w, b, y, ROWS, dim, 1e-5, act, BLOCK_N=dim, STAGES=p["s"], **common
        )  # fmt: skip
    if family == "tma":
        kernel = norm_act_tma[grid]
        return lambda x, w, b, y: kernel(x, w, b, y, ROWS, 1e-5, act, COLS=dim, STAGES=p["s"], **common)
    if "s" in p:
        kernel = copy_persistent[grid]
        return lambda x, w, b, y: kernel(x, y, ROWS, dim, BLOCK_N=dim, STAGES=p["s"], **common)
    kernel = copy_blocks[grid]
    return lambda x, w, b, y: kernel(x, y, ROWS, dim, BLOCK_N=dim, **common)


def cell_inputs(dtype, dim: int):
    """(bytes moved per call, input sets rotating past L2, NaN-poisoned outputs, scale, bias)."""
    nbytes = 2 * ROWS * dim * dtype.itemsize
    copies = copies_needed(nbytes)
    xs = [torch.randn(ROWS, dim, device="cuda", dtype=dtype) * 2 + 0.5 for _ in range(copies)]
    ys = [torch.full_like(x, float("nan")) for x in xs]
    w = torch.randn(dim, device="cuda", dtype=dtype) * 0.2 + 1
    b = torch.randn(dim, device="cuda", dtype=dtype) * 0.2
    return nbytes, xs, ys, w, b


def probe_cell(timer, bw, dtype, dim, act, quick) -> dict:
    elem = dtype.itemsize
    nbytes, xs, ys, w, b = cell_inputs(dtype, dim)
    copies = len(xs)
    name = str(dtype).removeprefix("torch.")
    cell = {"dtype": name, "D": dim, "act": act.name, "roofline_us": nbytes / bw * 1e6}
    cell["memcpy_us"] = round(timer([lambda i=i: ys[i].copy_(xs[i]) for i in range(copies)]).gpu_us, 2)

    def shipped(i):
        launch_norm_act(xs[i], w, b, None, ys[i], None, norm=Norm.LAYER, activation=act, eps=1e-5)

    cell["shipped_us"] = round(timer([lambda i=i: shipped(i) for i in range(copies)]).gpu_us, 2)
    cell["shipped_tier"] = norm_act_config(ROWS, dim, name).tier.name
    shipped(0)
    torch.cuda.synchronize()
    reference = ys[0].float().clone()
    times, failures = {}, {}
    for family, label, p in variants(dim, elem, quick):
        try:
            launch = launcher(family, p, dim, int(act))
            ys[0].fill_(float("nan"))
            launch(xs[0], w, b, ys[0])
            torch.cuda.synchronize()
            want = xs[0].float() if family == "copy" else reference
            difference = (ys[0].float() - want).abs().max().item()
            if not difference <= (0.0 if family == "copy" else 0.02 if elem == 2 else 1e-5):
                failures[label] = f"max abs difference {difference}"
                continue
            calls = [functools.partial(launch, xs[i], w, b, ys[i]) for i in range(copies)]
            times[label] = round(timer(calls).gpu_us, 2)
        except Exception as error:  # a shape that does not compile or fit is a result, not a crash
            failures[label] = f"{type(error).__name__}: {str(error)[:200]}"
    cell["variants_us"] = times
    cell["failures"] = failures
    return summarize(cell)


LEAN_FORMS = {  # FORM: (activation it computes, label)
    0: (None, "shipped_math"),
    1: ("gelu", "gelu6"),
    4: ("tanh", "tanh_approx"),
    5: ("identity", "identity"),
    6: ("gelu", "gelu5"),
}
LEAN_SHAPES = {256: ((2, 1), (4, 1), (4, 2), (8, 1), (8, 2), (8, 4), (16, 4), (16, 8)),
               1024: ((1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (4, 4), (4, 8))}  # fmt: skip
LEAN_SETS = (*((form, u, e) for form in (6, 1, 4) for u in (0, 1) for e in (0, 1)), (0, 0, 0), (0, 0, 1))


def reference64(x, w, b, activation: str):
    y = torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), 1e-5)
    return {"gelu": torch.nn.functional.gelu, "tanh": torch.tanh, "identity": lambda t: t}[activation](y)


def probe_lean_cell(timer, bw, dtype, dim) -> dict:
    """The arithmetic, not the shape: the shipped kernel per activation, and leaner forms of the
    same math (fewer instructions per element) in the shipped kind of block shapes."""
    elem = dtype.itemsize
    nbytes, xs, ys, w, b = cell_inputs(dtype, dim)
    copies = len(xs)
    name = str(dtype).removeprefix("torch.")
    cell = {"dtype": name, "D": dim, "roofline_us": nbytes / bw * 1e6, "times_us": {}, "rel_err": {}}
    refs = {a: reference64(xs[0], w, b, a) for a in ("gelu", "tanh", "identity")}

    def record(label, launch, activation):
        ys[0].fill_(float("nan"))
        launch(xs[0], w, b, ys[0])
        torch.cuda.synchronize()
        ref = refs[activation]
        err = float(torch.linalg.vector_norm(ys[0].double() - ref) / torch.linalg.vector_norm(ref))
        cell["rel_err"][label] = err
        if not err <= (1e-2 if elem == 2 else 1e-5):
            return
        calls = [functools.partial(launch, xs[i], w, b, ys[i]) for i in range(copies)]
        cell["times_us"][label] = round(timer(calls).gpu_us, 2)

    for act, code in (("tanh", Activation.TANH), ("gelu", Activation.GELU)):

        def shipped(x, w_, b_, y, code=code):
            launch_norm_act(x, w_, b_, None, y, None, norm=Norm.LAYER, activation=code, eps=1e-5)

        record(f"shipped_{act}", shipped, act)
    for m, wp in LEAN_SHAPES[dim]:
        for form, unpack, even in LEAN_SETS:
            if (unpack or form in (4, 6)) and dtype != torch.bfloat16:
                continue
            activation, label = LEAN_FORMS[form]
            for act_code, act_name in ((int(Activation.GELU), "gelu"), (int(Activation.TANH), "tanh")):
                if form != 0 and act_name == "tanh":
                    continue
                kernel = norm_act_lean[(triton.cdiv(ROWS, m),)]
                launch = functools.partial(
                    kernel, rows=ROWS, cols=dim, eps=1e-5, activation=act_code, BLOCK_M=m, BLOCK_N=dim,
                    FORM=form, UNPACK=unpack, EVEN=even, num_warps=wp,
                )  # fmt: skip
                tag = f"{label if form else 'shipped_math_' + act_name}_u{unpack}e{even}_m{m}w{wp}"
                try:
                    record(
                        tag, lambda x, w_, b_, y, launch=launch: launch(x, w_, b_, y), activation or act_name
                    )
                except Exception as error:
                    cell["rel_err"][tag] = f"{type(error).__name__}: {str(error)[:200]}"
    return cell


def probe_rowwarp_cell(timer, bw, dtype, dim) -> dict:
    """The shipped kernel against ``norm_act_rowwarp`` (whole rows per warp) in several shapes."""
    nbytes, xs, ys, w, b = cell_inputs(dtype, dim)
    chunk = 32 * 16 // dtype.itemsize  # one warp of 16-byte vectors
    cell = {"dtype": str(dtype).removeprefix("torch."), "D": dim, "roofline_us": nbytes / bw * 1e6}
    cell.update(times_us={}, rel_err={})
    for act_name, code in (("gelu", Activation.GELU), ("tanh", Activation.TANH)):
        ref = reference64(xs[0], w, b, act_name)
        launches = {"shipped": functools.partial(_shipped, code=code)}
        for m, wp in ((1, 1), (2, 1), (2, 2), (4, 2), (4, 4), (8, 4), (8, 8), (16, 8)):
            kernel = norm_act_rowwarp[(triton.cdiv(ROWS, m),)]
            launches[f"rowwarp_m{m}w{wp}"] = functools.partial(
                kernel, rows=ROWS, eps=1e-5, activation=int(code), BLOCK_M=m, COLS=dim, CHUNK=chunk,
                num_warps=wp,
            )  # fmt: skip
        for label, launch in launches.items():
            tag = f"{label}_{act_name}"
            ys[0].fill_(float("nan"))
            launch(xs[0], w, b, ys[0])
            torch.cuda.synchronize()
            err = float(torch.linalg.vector_norm(ys[0].double() - ref) / torch.linalg.vector_norm(ref))
            cell["rel_err"][tag] = err
            if err <= (1e-2 if dtype.itemsize == 2 else 1e-5):
                calls = [functools.partial(launch, xs[i], w, b, ys[i]) for i in range(len(xs))]
                cell["times_us"][tag] = round(timer(calls).gpu_us, 2)
    return cell


def _shipped(x, w, b, y, code):
    launch_norm_act(x, w, b, None, y, None, norm=Norm.LAYER, activation=code, eps=1e-5)


def lean_summary(cell: dict) -> str:
    roof, times = cell["roofline_us"], cell["times_us"]
    lines = [f"{cell['dtype']} D={cell['D']} roof {roof:.2f}us"]
    groups = {}
    for label, us in times.items():
        key = label.rsplit("_m", 1)[0] if "_u" in label else label
        if key not in groups or us < groups[key][0]:
            groups[key] = (us, label)
    for _key, (us, label) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        lines.append(f"  {us / roof:.3f}x {us:7.2f}us {label}  err {cell['rel_err'][label]:.1e}")
    return "\n".join(lines)


def summarize(cell: dict) -> dict:
    roof = cell["roofline_us"]
    for family in ("copy", "wave", "pers", "tma"):
        found = [(us, key) for key, us in cell["variants_us"].items() if key.startswith(family)]
        if found:
            us, key = min(found)
            cell[f"best_{family}"] = {"us": us, "variant": key, "ratio": round(us / roof, 3)}
    cell["shipped_ratio"] = round(cell["shipped_us"] / roof, 3)
    cell["memcpy_ratio"] = round(cell["memcpy_us"] / roof, 3)
    return cell


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="fewer pipelining depths")
    parser.add_argument("--cells", default="bfloat16:256,bfloat16:1024,float32:256,float32:1024")
    parser.add_argument("--lean", action="store_true", help="the arithmetic probe instead of shapes")
    parser.add_argument(
        "--rowwarp", action="store_true", help="whole rows per warp against the shipped kernel"
    )
    args = parser.parse_args(argv)
    # Tensor descriptors made on the device need a scratch allocation per launch.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    timer = GpuTimer(reps=200, warmup=20)
    bw = measure_copy_bandwidth(timer, 1 << 30)
    record = {
        "device": torch.cuda.get_device_name(),
        "triton": triton.__version__,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": ROWS,
        "copy_bandwidth_TBps": bw / 1e12,
        "cells": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in args.cells.split(","):
        dtype_name, dim = spec.split(":")
        if args.lean or args.rowwarp:
            probe, stem = (probe_lean_cell, "lean") if args.lean else (probe_rowwarp_cell, "rowwarp")
            cell = probe(timer, bw, getattr(torch, dtype_name), int(dim))
            record["cells"].append(cell)
            (args.out / f"short_rows_{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
            print(lean_summary(cell), flush=True)
            continue
        cell = probe_cell(timer, bw, getattr(torch, dtype_name), int(dim), Activation.GELU, args.quick)
        record["cells"].append(cell)
        (args.out / "short_rows.json").write_text(json.dumps(record, indent=1) + "\n")
        best = "  ".join(
            f"{f}={cell[f'best_{f}']['ratio']:.3f}x({cell[f'best_{f}']['variant']})"
            for f in ("copy", "wave", "pers", "tma")
            if f"best_{f}" in cell
        )
        print(
            f"{cell['dtype']:>8} D={cell['D']:<5} roof {cell['roofline_us']:.2f}us shipped "
            f"{cell['shipped_ratio']:.3f}x memcpy {cell['memcpy_ratio']:.3f}x  {best}  "
            f"failures {len(cell['failures'])}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
