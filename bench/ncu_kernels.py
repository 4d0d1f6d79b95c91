"""Hardware counters of graphopt's fused kernels and of a device copy of the same bytes, read by
Nsight Compute: what bounds a kernel that misses the copy's time (memory, instruction issue, or
occupancy), as a measured explanation for the widths grid (bench_widths.py).

    python bench/ncu_kernels.py --out OUT [--cases norm_act:bfloat16:768 norm_act_linear:bfloat16:768:4 ...]

Each case is OP:DTYPE:D[:K] on 16384 rows (LayerNorm with scale and bias, GELU; NormActLinear with a
linear bias and K outputs). OP is ``norm_act`` (the JIT launch PyTorch runs), ``norm_act_aot``
(the same kernel with its flag and operand-row arguments unspecialized: the code of the
ahead-of-time variant for ONNX Runtime), ``norm_act_linear`` or ``copy`` (an elementwise kernel
reading and writing the row bytes: ``Tensor.copy_`` between contiguous tensors is a DMA copy, which
has no counters here). The script runs itself under ``ncu --profile-from-start off``: each case is
launched until compiled and warm, then once inside a profiler range. Results: ``ncu_kernels.json``
(selected counters per case and the instructions each element of X costs) and ``ncu_kernels.md``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROWS = 16384
CASES = [
    "copy:bfloat16:768", "norm_act:bfloat16:768", "norm_act:bfloat16:1024", "norm_act:bfloat16:640",
    "norm_act:float32:768", "norm_act:float32:5120", "norm_act_aot:float32:5120",
    "norm_act_linear:bfloat16:768:4", "norm_act_linear:float32:256:4", "copy:float32:256",
]  # fmt: skip
SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "LaunchStats", "Occupancy",
            "WarpStateStats", "MemoryWorkloadAnalysis")  # fmt: skip
# The counters the report keeps (Nsight Compute's raw names), in its column order.
KEPT = {
    "gpu__time_duration.sum": "time_us",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_active_pct",
    "sm__inst_executed.sum": "warp_instructions",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__occupancy_limit_registers": "blocks_per_sm_by_registers",
    "launch__block_size": "block_threads",
    "launch__grid_size": "grid",
}
STALL = re.compile(
    r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)(?:_per_issue_active)?\.ratio$"
)
TIME_UNITS = {"ns": 1e3, "nsecond": 1e3, "us": 1.0, "usecond": 1.0, "ms": 1e-3, "msecond": 1e-3}  # -> µs
EXTRA_METRICS = "sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"


def ncu_path() -> str:
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)
    if found is None:
        raise SystemExit("ncu (Nsight Compute) not found")
    return found


def launcher(case: str):
    """A callable launching the case's kernel once, on fresh tensors made here."""
    import torch

    from bench.bench_aot_vs_jit import flags_unspecialized_kernel
    from graphopt.fused import Activation, Norm
    from graphopt.fused.norm_act import triton_kernel as norm_act_module
    from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear

    op, dtype_name, d, *k = case.split(":")
    dtype, cols = getattr(torch, dtype_name), int(d)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(ROWS, cols, device="cuda", generator=gen).to(dtype)
    w = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    b = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    gelu, layer = int(Activation.GELU), int(Norm.LAYER)
    if op == "copy":
        y = torch.empty_like(x)
        return lambda: torch.mul(x, 1, out=y)
    if op in ("norm_act", "norm_act_aot"):
        y = torch.empty_like(x)
        plain = norm_act_module.norm_act_kernel
        kernel = flags_unspecialized_kernel() if op == "norm_act_aot" else plain

        def call():
            norm_act_module.norm_act_kernel = kernel
            try:
                norm_act_module.launch_norm_act(x, w, b, None, y, None, norm=layer, activation=gelu, eps=1e-5)
            finally:
                norm_act_module.norm_act_kernel = plain

        return call
    if op == "norm_act_linear":
        out = int(k[0])
        weight = (torch.randn(out, cols, device="cuda", generator=gen) * cols**-0.5).to(dtype)
        lb = torch.randn(out, device="cuda", generator=gen).to(dtype)
        y = torch.empty(ROWS, out, device="cuda", dtype=dtype)
        return lambda: launch_norm_act_linear(
            x,
            w,
            b,
            weight,
            lb,
            y,
            norm=layer,
            activation=gelu,
            out_activation=int(Activation.IDENTITY),
            eps=1e-5,
        )
    raise SystemExit(f"unknown op in case {case!r}")


def run_cases(cases: list[str]) -> None:
    """The profiled program: each case warm, then one launch inside a profiler range."""
    import torch

    for case in cases:
        call = launcher(case)
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        print(f"ran {case}", file=sys.stderr, flush=True)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse(csv_text: str, cases: list[str]) -> list[dict]:
    """The raw page's rows (one per profiled kernel, in launch order) as the kept counters."""
    lines = [line for line in csv_text.splitlines() if line.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, rows = table[0], table[1], table[2:]
    if len(rows) != len(cases):
        print(f"ncu profiled {len(rows)} kernels for {len(cases)} cases", file=sys.stderr)
        cases = [f"kernel {i}" for i in range(len(rows))]
    out = []
    for case, row in zip(cases, rows, strict=True):
        values = dict(zip(header, row, strict=True))
        unit = dict(zip(header, units, strict=True))
        kept = {"case": case, "kernel": values.get("Kernel Name", "")[:60]}
        for name, label in KEPT.items():
            value = _number(values.get(name, ""))
            if value is not None and name == "gpu__time_duration.sum":
                value = value / TIME_UNITS.get(unit.get(name, ""), 1.0)
            kept[label] = value
        stalls = {m.group(1): _number(v) for n, v in values.items() if (m := STALL.match(n)) and _number(v)}
        kept["top_stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:4])
        parts = case.split(":")
        d = parts[2] if len(parts) > 2 else None
        if kept.get("warp_instructions") and d:
            kept["thread_instructions_per_element"] = round(
                kept["warp_instructions"] * 32 / (ROWS * int(d)), 2
            )
        out.append(kept)
    return out


def markdown(record: dict) -> str:
    cols = ["case", "time_us", "dram_pct", "issue_active_pct", "sm_pct", "thread_instructions_per_element",
            "registers", "achieved_occupancy_pct", "theoretical_occupancy_pct", "top_stalls"]  # fmt: skip
    lines = [
        f"# Hardware counters ({record['device']}, {record['date']})",
        "",
        f"`{record['command']}`",
        "",
        f"{ROWS} rows; Nsight Compute {record['ncu']}, clocks left alone (`--clock-control none`). "
        "issue_active: the share of cycles a scheduler issued an instruction (near 100%: bound by "
        "instruction issue); dram: the share of the memory's peak throughput. Instructions per element: "
        "warp instructions × 32 / elements of X (an upper bound on each thread's share).",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for row in record["results"]:
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "top_stalls":
                v = ", ".join(f"{k} {s:.1f}" for k, s in (v or {}).items())
            elif isinstance(v, float):
                v = f"{v:,.1f}"
            cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=CASES)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the profiled program
    args = parser.parse_args()
    if args.run:
        run_cases(args.cases)
        return 0
    import torch

    ncu = ncu_path()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw"]
    for section in SECTIONS:
        cmd += ["--section", section]
    program = [sys.executable, str(Path(__file__).resolve()), "--run", "--cases", *args.cases]
    done = subprocess.run(
        [*cmd, "--metrics", EXTRA_METRICS, *program], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:  # (a counter this ncu does not know: the sections alone)
        sys.stderr.write(done.stdout[-1500:] + done.stderr[-1500:])
        done = subprocess.run([*cmd, *program], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        return 1
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    if args.out:  # (the whole page first, for counters the report does not keep)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ncu_kernels.csv").write_text(done.stdout)
    record = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/ncu_kernels.py " + " ".join(a for a in sys.argv[1:]),
        "ncu": version[-1] if version else "",
        "rows": ROWS,
        "results": parse(done.stdout, args.cases),
    }
    text = markdown(record)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ncu_kernels.json").write_text(json.dumps(record, indent=2) + "\n")
        (args.out / "ncu_kernels.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
