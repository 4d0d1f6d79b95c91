"""What an eager call of a fused op costs the host, against the native launches it replaces.

``torch.ops.graphopt.norm_act`` (LayerNorm → GELU, 16384 × 256 fp32 by default) without a CUDA graph,
against eager ``layer_norm`` + ``gelu``: per call, the host time of the call itself (the GPU idle:
synchronized before, not after), the start-to-finish time (one call, then synchronize), and the GPU
time, beside the HBM roofline. The fused op runs five ways: through the op (the default: its C++
kernel, ``graphopt.fused.torch_native``, launching the ahead-of-time kernel of libgraphopt_ort);
through the op's Python kernels (past the autograd layer where no gradient is needed, launched from a
plan kept per signature: the default where the C++ kernel is not built); the same with Triton's JIT
launch; and, without the op's dispatch (which shows what the dispatcher costs), the general launch
glue with the cached launcher and the launch plan.

    PYTHONPATH=$PWD python3 bench/bench_eager_op_cost.py --out bench/results/eager_op_cost [--shape 16384x256]

Writes ``eager_op_cost.json`` and ``eager_op_cost.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt  # noqa: F401  (registers torch.ops.graphopt.*)
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us, start_to_finish_us
from graphopt.fused import Activation, Norm, torch_native, torch_triton
from graphopt.fused.norm_act import torch_impl as norm_act_impl
from graphopt.fused.torch_ops import CUDA_KERNELS, PLANNED

EPS = 1e-5


def host_us(call, iters: int = 2000) -> float:
    """Median time of the call alone, each started on an idle GPU."""
    for _ in range(20):
        call()
    samples = []
    for _ in range(iters):
        torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def variants(x, weight, bias):
    dims = (x.shape[-1],)
    op = torch.ops.graphopt.norm_act.default
    # (the op's Python kernels: where the C++ kernel is in front, they are on graphopt_eager's copy)
    python_op = torch.ops.graphopt_eager.norm_act.default if "norm_act" in torch_native.active_ops() else op

    def native():
        return F.gelu(F.layer_norm(x, dims, weight, bias, EPS))

    def fused():
        return op(x, weight, bias, "layer", "gelu", EPS, -1)

    def python_kernels():
        return python_op(x, weight, bias, "layer", "gelu", EPS, -1)

    def glue():
        return norm_act_impl.launch(
            x, weight, bias, None, Norm.LAYER, Activation.GELU, EPS, x.dim() - 1, torch_triton.eager_launch
        )[0]

    plans = PLANNED["norm_act"]

    def planned():
        return plans(x, weight, bias, "layer", "gelu", EPS, -1)

    return {"layer_norm + gelu (native, 2 launches)": (native, True),
            "graphopt.norm_act (C++ kernel)": (fused, True),
            "graphopt.norm_act, Python kernels": (python_kernels, True),
            "graphopt.norm_act, Python kernels, Triton JIT launch": (python_kernels, False),
            "launch glue without the op dispatch": (glue, True),
            "launch plan without the op dispatch": (planned, True)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/eager_op_cost"))
    parser.add_argument("--shape", default="16384x256", help="ROWSxCOLS")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    native_ops = torch_native.activate(CUDA_KERNELS)  # (built before timing anything)
    print(f"C++ kernels for {native_ops or 'no op'} {torch_native.why_inactive()}", flush=True)
    rows, cols = (int(n) for n in args.shape.lower().split("x"))
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", dtype=dtype, generator=generator)
    weight = torch.randn(cols, device="cuda", dtype=dtype, generator=generator)
    bias = torch.randn(cols, device="cuda", dtype=dtype, generator=generator)
    moved = 2 * x.numel() * x.element_size() + 2 * cols * x.element_size()
    roofline_us = moved / copy_bandwidth_bytes_per_s() * 1e6
    reference = None
    results = []
    for name, (call, cached) in variants(x, weight, bias).items():
        torch_triton.CACHED_LAUNCH = cached
        out = call()
        reference = out if reference is None else reference
        entry = {
            "variant": name,
            "host_us": round(host_us(call), 2),
            "s2f_us": round(start_to_finish_us(call, warmup=20, iters=500), 2),
            "gpu_us": round(gpu_us(call, iters=20) or 0.0, 2),
            "max_abs_err_vs_native": float((out.float() - reference.float()).abs().max()),
        }
        entry["s2f_x_roofline"] = round(entry["s2f_us"] / roofline_us, 2)
        results.append(entry)
        print(json.dumps(entry), flush=True)
    torch_triton.CACHED_LAUNCH = True
    device = torch.cuda.get_device_name()
    meta = {"device": device, "torch": torch.__version__, "shape": [rows, cols], "dtype": args.dtype,
            "roofline_us": round(roofline_us, 2), "date": str(datetime.date.today()),
            "cpp_kernel_ops": list(native_ops),
            "cpp_kernel_missing": torch_native.why_inactive()}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eager_op_cost.json").write_text(json.dumps({**meta, "results": results}, indent=1) + "\n")
    lines = [
        f"# Eager call cost, norm → GELU {rows} × {cols} {args.dtype} ({device}, {meta['date']})",
        "",
        f"HBM roofline {roofline_us:.1f} µs. Host: the call alone on an idle GPU; start-to-finish: one call, "
        "then synchronize (medians). Command: `python3 bench/bench_eager_op_cost.py "
        f"--shape {args.shape} --dtype {args.dtype}`; torch {torch.__version__}.",
        "",
        "| variant | host µs | start-to-finish µs (× roofline) | GPU µs | max abs err vs native |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['variant']} | {r['host_us']} | {r['s2f_us']} ({r['s2f_x_roofline']}×) | {r['gpu_us']} | "
            f"{r['max_abs_err_vs_native']:.1e} |"
        )
    (args.out / "eager_op_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
