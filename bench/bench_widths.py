"""graphopt's fused NormAct and NormActLinear (and their residual forms) across the widths real models
use, in every dtype, affine or not, every activation, through PyTorch (the Triton JIT kernel) and
through ONNX Runtime's CUDA EP (the library's AOT cubins): each cell's time next to the fastest
device copy of the same bytes measured in the same run, the roofline, torch.compile of the same
computation and, for ONNX Runtime, its own kernels.

    PYTHONPATH=. python bench/bench_widths.py [--ops ...] [--dims ...] [--rows ...] [--dtypes ...]
        [--affine 1,0] [--activations ...] [--runtimes torch,ort] [--off-grid 896,3584,12288]
        [--budget-s SECONDS] [--candidates N] [--out bench/results]
    PYTHONPATH=. python bench/bench_widths.py --check     # a tiny grid; without a GPU, on the CPU

Defaults are the whole grid. Timing (bench/widths_timing.py): calls on distinct inputs,
enough that together they overflow L2 (at least 20), captured in one CUDA graph and replayed, so
launch cost is excluded; the copies are timed the same way on the same bytes (X in and Y out,
residual and sum, parameters). Every implementation's output is NaN-poisoned, then checked against the
op spec's float64 reference on a sample of rows, eagerly and again after a graph replay, before it is
timed. Cases run in priority order (GELU, affine and 16384 rows first) and the JSON is rewritten after
each, so ``--budget-s`` (or a timeout) leaves a valid record of what was measured.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # (before onnxruntime, so that CUDA libraries resolve the same way)

if not torch.cuda.is_available():  # (before any kernel module is imported: Triton reads it then)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from bench.widths_cases import (
    ACTIVATIONS,
    DTYPES,
    OPS,
    Case,
    Checker,
    Data,
    NoCheck,
    compiled_calls,
    graphopt_torch_calls,
)
from bench.widths_report import finish, progress_line, versions, write_json, write_reports
from bench.widths_timing import Device, GraphTimer, copy_bandwidth, copy_buffers, copy_calls, time_calls

DIMS = (256, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 8192)
# One width off the grid per decade, from real models: Qwen2-0.5B (896 = 512 + 256 + 128), Qwen2-7B
# (3584 = 7 * 512), GPT-3 (12288, past the longest single-block tier: the looped kernel).
OFF_GRID = (896, 3584, 12288)
ROWS = (1024, 16384, 65536)
CHECK_GRID = {"dims": [256, 768], "rows": [32], "dtypes": ["float32"], "activations": ["gelu"],
              "off_grid": [], "affine": [True, False]}  # fmt: skip


def _list(kind):
    def parse(text: str):
        return [] if text in ("", "none") else [kind(v) for v in text.split(",")]

    return parse


def _choices(valid):
    def parse(text: str):
        values = _list(str)(text)
        if bad := [v for v in values if v not in valid]:
            raise argparse.ArgumentTypeError(f"{bad}: expected some of {', '.join(valid)}")
        return values

    return parse


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=_choices(OPS), default=list(OPS))
    p.add_argument("--dims", type=_list(int), default=list(DIMS))
    p.add_argument("--rows", type=_list(int), default=list(ROWS))
    p.add_argument("--dtypes", type=_choices(DTYPES), default=list(DTYPES))
    p.add_argument("--affine", type=_list(lambda v: v.lower() in ("1", "yes", "true")), default=[True, False])
    p.add_argument("--activations", type=_choices(ACTIVATIONS), default=list(ACTIVATIONS))
    p.add_argument("--runtimes", type=_choices(("torch", "ort")), default=["torch", "ort"])
    p.add_argument(
        "--off-grid", type=_list(int), default=list(OFF_GRID), help="extra widths ('none': no more)"
    )
    p.add_argument("--k", type=int, default=4, help="NormActLinear's output features")
    p.add_argument("--budget-s", type=float, default=None, help="start no case after this many seconds")
    p.add_argument(
        "--candidates",
        type=int,
        default=0,
        help="also time up to N candidate launch shapes per kind (torch; bench/widths_candidates.py)",
    )
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    p.add_argument("--replays", type=int, default=10, help="timed graph replays per measurement (median)")
    p.add_argument("--order", choices=("priority", "grid"), default="priority")
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--name", default=None, help="file stem (default widths, or widths_check with --check)")
    p.add_argument("--no-picture", action="store_true")
    p.add_argument("--resume", action="store_true", help="keep an existing record's cells; measure the rest")
    p.add_argument(
        "--check", action="store_true", help="a tiny grid that tests the script (CPU without a GPU)"
    )
    args = p.parse_args(argv)
    if args.check:
        for key, value in CHECK_GRID.items():
            if f"--{key.replace('_', '-')}" not in " ".join(argv):
                setattr(args, key, value)
    args.name = args.name or ("widths_check" if args.check else "widths")
    return args


def cases(args) -> list[Case]:
    dims = list(dict.fromkeys([*args.dims, *args.off_grid]))
    found = [Case(op, dt, d, r, a, act, k=args.k) for op in args.ops for dt in args.dtypes for d in dims
             for r in args.rows for a in args.affine for act in args.activations]  # fmt: skip
    if args.order == "grid":
        return found

    def rank(values, v):
        return values.index(v) if v in values else len(values)

    # The headline cells first (GELU, affine, 16384 rows), so a budget cut keeps those.
    # Within those, ops and dtypes in the order given, so a short run can put bfloat16 first.
    return sorted(found, key=lambda c: (c.activation != "gelu", not c.affine, rank([16384, 1024], c.rows),
                                        rank(args.ops, c.op), rank(args.dtypes, c.dtype), c.D))  # fmt: skip


def _error(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]


class Context:
    def __init__(self, args):
        self.args = args
        self.device = Device(torch.cuda.is_available())
        self.stream = torch.cuda.Stream() if self.device.gpu else None
        self.timer = GraphTimer(args.replays) if self.device.gpu else None
        self.bandwidth = copy_bandwidth(self.device)
        self.ort = self.ort_error = None
        if "ort" in args.runtimes:
            try:
                from bench.widths_ort import OrtRunner
                from graphopt.ort import library_path

                library_path()  # (fails here, once, when the library was not built)
                self.ort = OrtRunner(self.device.gpu, self.stream)
            except Exception as error:  # the torch cells are still worth having
                self.ort_error = _error(error)

    def time(self, calls, checker, relaxed=False) -> dict:
        try:
            return time_calls(calls, self.device, self.timer, checker, stream=self.stream, relaxed=relaxed)
        except Exception as error:
            return {"error": _error(error)}


def measure_copies(ctx: Context, case: Case, plan, at) -> tuple[dict, dict]:
    """({method: µs} through torch, {"ort_identity": µs} through ONNX Runtime where it runs)."""
    srcs, dsts = copy_buffers(case.bytes_moved(), plan, ctx.device)
    torch_copies = {name: ctx.time(calls, NoCheck()) for name, calls in copy_calls(srcs, dsts, at).items()}
    ort_copies = {}
    if ctx.ort is not None:
        from bench.widths_ort import identity_model

        try:
            session = ctx.ort.session(identity_model(srcs[0]), with_library=False)
            per_set = ctx.ort.calls(session, [{"x": s} for s in srcs], [{"y": d} for d in dsts])
            ort_copies["ort_identity"] = ctx.time([per_set[i] for i in at], NoCheck(), relaxed=True)
        except Exception as error:
            ort_copies["ort_identity"] = {"error": _error(error)}
    return torch_copies, ort_copies


def ort_measures(ctx: Context, case: Case, data: Data, at, cell: dict) -> dict:
    """graphopt's node through the library (returned) and ONNX Runtime's own ops (into ``cell``)."""
    from bench.widths_ort import fused_model, native_models

    if ctx.ort is None:
        return {"error": f"onnxruntime: {ctx.ort_error}"}
    feeds = [data.feeds(i) for i in range(len(data.inputs))]
    checker = Checker(data)
    try:
        session = ctx.ort.session(fused_model(case, feeds[0], data.outputs[0]), with_library=True)
        per_set = ctx.ort.calls(session, feeds, data.outputs)
        fused = ctx.time([per_set[i] for i in at], checker, relaxed=True)
    except Exception as error:
        fused = {"error": _error(error)}
    extra = {"ones": torch.ones(case.D, device=ctx.device.torch, dtype=case.torch_dtype)}
    if case.linear:
        extra["weight_t"] = data.params["weight"].t().contiguous()
    native_feeds = [f | extra for f in feeds]
    refused = []
    for model in native_models(case, native_feeds[0], data.outputs[0]):
        try:
            session = ctx.ort.session(model, with_library=False)
        except Exception as error:  # (a node its CUDA EP lacks in this dtype: the next spelling)
            refused.append(_error(error))
            continue
        per_set = ctx.ort.calls(session, native_feeds, data.outputs)
        m = ctx.time([per_set[i] for i in at], checker, relaxed=True)
        if "us" in m:
            cell["ort_native_us"], cell["ort_native_timing"] = round(m["us"], 2), m["timing"]
        else:
            cell.setdefault("notes", {})["ort_native"] = f"failed: {m['error']}"
        break
    else:
        cell.setdefault("notes", {})["ort_native"] = "no spelling runs: " + " | ".join(refused)[:400]
    return fused


def run_case(ctx: Context, case: Case) -> list[dict]:
    args, device = ctx.args, ctx.device
    plan = device.plan(case.bytes_moved(), args.check)
    at = [i % plan.sets for i in range(plan.calls)]
    tier = case.launch_tier()
    base = {"op": case.op, "dtype": case.dtype, "D": case.D, "rows": case.rows, "affine": case.affine,
            "activation": case.activation, "tier": tier.name,
            "roofline_us": round(case.bytes_moved() / ctx.bandwidth * 1e6, 2)}  # fmt: skip
    if case.D not in args.dims:
        base["off_grid"] = True
    if case.linear:
        base["K"] = case.k
    torch_copies, ort_copies = measure_copies(ctx, case, plan, at)
    _release(device)
    data = Data(case, plan.sets, device.torch)
    notes = {}
    if not device.gpu:
        notes["torch_compile"] = "skipped: no GPU"
    elif args.no_compile:
        notes["torch_compile"] = "skipped: --no-compile"
    else:
        m = ctx.time(compiled_calls(data, at), Checker(data))
        if "us" in m:
            base["torch_compile_us"] = round(m["us"], 2)
        else:
            notes["torch_compile"] = f"failed: {m['error']}"
        _release(device)
    base.setdefault("torch_compile_us", None)
    cells = []
    for runtime in args.runtimes:
        cell = {**base, "runtime": runtime, "notes": dict(notes)}
        copies = dict(torch_copies) | (ort_copies if runtime == "ort" else {})
        if runtime == "torch":
            m = ctx.time(graphopt_torch_calls(data, at), Checker(data))
            if args.candidates:
                cell["candidates"] = candidates(ctx, data, at, tier)
        else:
            m = ort_measures(ctx, case, data, at, cell)
        finish(cell, m, copies, device, tier)
        cells.append(cell)
    del data
    _release(device)
    return cells


def resume(record: dict, earlier: dict, todo: list[Case], runtimes: list[str]) -> list[Case]:
    """Carries an earlier run's cells into ``record`` and returns the cases it lacks: the full grid
    takes hours, so it is measured over several sessions. Each cell keeps the copy measured with it
    in its own run; runs on another device are refused, not mixed."""
    if earlier["device"] != record["device"]:
        raise SystemExit(f"--resume: the record is from {earlier['device']}, this is {record['device']}")
    record["earlier_runs"] = [*earlier.get("earlier_runs", []), {k: earlier[k] for k in ("date", "command")}]

    def key(c):
        return (c["op"], c["dtype"], c["D"], c["rows"], c["affine"], c["activation"])

    done = {(*key(c), c["runtime"]) for c in earlier["cells"]}
    missing = [c for c in todo if any((*key(vars(c)), r) not in done for r in runtimes)]
    # A case measured in part is measured again whole (its cells share their copy and compile runs).
    again = {key(vars(c)) for c in missing}
    record["cells"] = [c for c in earlier["cells"] if key(c) not in again]
    return missing


def _release(device: Device) -> None:
    """Hands freed blocks back to the driver: ONNX Runtime allocates outside torch's cache, and the
    largest cells need most of the GPU's memory."""
    gc.collect()
    if device.gpu:
        torch.cuda.empty_cache()


def candidates(ctx, data, at, tier) -> dict:
    from bench.widths_candidates import candidate_calls

    found = {}
    for name, calls in candidate_calls(data, at, tier, ctx.args.candidates).items():
        m = ctx.time(calls, Checker(data))
        found[name] = round(m["us"], 2) if "us" in m else f"error: {m['error']}"
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # A timeout's SIGTERM ends the run as Ctrl-C does: the record so far is kept and reported.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _run(args, argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args, argv) -> int:
    started = time.time()
    torch.manual_seed(0)
    ctx = Context(args)
    todo = cases(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    record = {
        "device": ctx.device.name,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "bench/bench_widths.py", *argv]),
        **versions(),
        "copy_bandwidth_TBps": round(ctx.bandwidth / 1e12, 4),
        "timing": "CUDA-graph replay / calls"
        if ctx.device.gpu
        else "wall clock (no GPU: a check, not a benchmark)",
        "sms": ctx.device.sms,
        "l2_bytes": ctx.device.l2_bytes,
        "complete": False,
        "cells": [],
    }
    if ctx.ort_error:
        record["ort_unavailable"] = ctx.ort_error
    if args.resume and path.exists():
        todo = resume(record, json.loads(path.read_text()), todo, args.runtimes)
    print(
        f"{record['device']}: copy bandwidth {ctx.bandwidth / 1e12:.3f} TB/s; {len(todo)} cases", flush=True
    )
    try:
        for n, case in enumerate(todo):
            if args.budget_s is not None and time.time() - started > args.budget_s:
                record["stopped"] = f"--budget-s {args.budget_s:g} spent after {n} of {len(todo)} cases"
                break
            with torch.cuda.stream(ctx.stream) if ctx.device.gpu else contextlib.nullcontext():
                cells = run_case(ctx, case)
            record["cells"] += cells
            write_json(path, record)
            for c in cells:
                print(progress_line(c), flush=True)
        else:
            record["complete"] = True
    except KeyboardInterrupt:
        record["stopped"] = f"interrupted after {len(record['cells'])} cells"
    record["seconds"] = round(time.time() - started, 1)
    write_json(path, record)
    print(write_reports(record, path, picture=not args.no_picture) or "", f"wrote {path} and .md", sep="\n")
    return 1 if any(c.get("errors") for c in record["cells"]) else 0


if __name__ == "__main__":
    sys.exit(main())
