"""The seed's and the per-feature model's NormActLinear launch (N = 128 features of B = 512 rows,
D = 256, K = 1 or ``--k``, tanh then ReLU) timed three ways on one GPU: Triton's JIT at the tier
graphopt picks, the same JIT kernel with its flag and operand-row arguments unspecialized (the
ahead-of-time variant's code), and the ahead-of-time cubin through the C++ launcher ONNX Runtime
uses (``bench/bench_aot_vs_jit.py``'s harness, built here with this machine's Triton, from the tree
the script runs from). Next to a device copy of the same bytes.

Three operand kinds: ``seed`` (no scale or bias, as the shared-norm seed), ``shared_affine`` (one
scale and bias row) and ``per_feature`` (a scale and bias row per feature, the per-feature model).

    python bench/probe_per_feature_aot.py [--k 1 4] [--dtypes float32 bfloat16] [--out DIR] [--name NAME]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from bench.bench_aot_vs_jit import DTYPES, F32, I32, I64, U64, build_harness, record_of, save_record
from bench.widths_timing import Device, GraphTimer, copy_buffers, copy_calls
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act_linear import triton_kernel as module
from graphopt.fused.norm_act_linear.triton_kernel import launch_norm_act_linear

N, B, D = 128, 512, 256
ACT, OUT_ACT, EPS = int(Activation.TANH), int(Activation.RELU), 1e-5
FLAGS = ["norm", "activation", "out_activation", "has_scale", "has_bias", "has_linear_bias", "has_residual",
         "write_sum", "w_inner", "w_groups", "b_inner", "b_groups", "r_inner", "r_groups", "wl_inner",
         "wl_groups", "lb_inner", "lb_groups"]  # fmt: skip


def graph_us(calls, timer: GraphTimer) -> float:
    for call in calls:
        call()
    torch.cuda.synchronize()
    graph, _ = GraphTimer.capture(calls)
    return timer.replay_us(graph, len(calls))


def operands(kind: str, dtype):
    """(scale, bias, rows_of) of one operand kind."""
    if kind == "seed":
        return None, None, (1, 1)
    groups = N if kind == "per_feature" else 1
    scale = (1 + 0.5 * torch.randn(groups, D, device="cuda")).to(dtype)
    bias = (0.5 * torch.randn(groups, D, device="cuda")).to(dtype)
    return scale, bias, ((B, N) if groups > 1 else (1, 1))


def probe(harness, dtype_name: str, kind: str, K: int, device: Device, timer: GraphTimer) -> dict:
    dtype, code = DTYPES[dtype_name]
    rows = N * B
    size = torch.finfo(dtype).bits // 8
    plan = device.plan(rows * (D + K) * size, check=False)
    xs = [torch.randn(rows, D, device="cuda").to(dtype) for _ in range(plan.sets)]
    ys = [torch.empty(rows, K, device="cuda", dtype=dtype) for _ in range(plan.sets)]
    scale, bias, rows_of = operands(kind, dtype)
    weight = (torch.randn(K, D, device="cuda") * D**-0.5).to(dtype)
    linear_bias = torch.randn(K, device="cuda").to(dtype)
    at = [j % plan.sets for j in range(plan.calls)]
    plain = module.norm_act_linear_kernel
    flags = triton.jit(plain.fn, do_not_specialize=FLAGS)

    def jit(i, kernel=plain):
        module.norm_act_linear_kernel = kernel
        try:
            return launch_norm_act_linear(
                xs[i], scale, bias, weight, linear_bias, ys[i], norm=int(Norm.LAYER), activation=ACT,
                out_activation=OUT_ACT, eps=EPS, scale_rows=rows_of, bias_rows=rows_of,
            )  # fmt: skip
        finally:
            module.norm_act_linear_kernel = plain

    broadcasts = (I64 * 10)(*rows_of, *rows_of, 1, 1, 1, 1, 1, rows)

    def aot(i):
        ptr = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
        error = harness.harness_norm_act_linear_rows(
            xs[i].data_ptr(), 0, ptr(scale), ptr(bias), weight.data_ptr(), linear_bias.data_ptr(),
            ys[i].data_ptr(), 0, rows, D, K, broadcasts, EPS, int(Norm.LAYER), ACT, OUT_ACT, code,
            torch.cuda.current_stream().cuda_stream,
        )  # fmt: skip
        if error:
            raise RuntimeError(error.decode())

    tier = jit(0).tier.name
    reference = ys[0].clone()
    srcs, dsts = copy_buffers(rows * (D + K) * size, plan, device)
    copy_us = min(graph_us(calls, timer) for calls in copy_calls(srcs, dsts, at).values())
    row = {"dtype": dtype_name, "operands": kind, "K": K, "tier": tier, "copy_us": round(copy_us, 2)}
    ways = {"jit": lambda i: jit(i), "jit_flags_unspecialized": lambda i: jit(i, flags), "aot": aot}
    for label, way in ways.items():
        ys[0].fill_(float("nan"))
        way(0)
        torch.cuda.synchronize()
        same = torch.allclose(ys[0].float(), reference.float(), rtol=1e-2, atol=1e-2)
        us = graph_us([lambda i=i, way=way: way(i) for i in at], timer)
        row[label] = {"us": round(us, 2), "x_copy": round(us / copy_us, 3), "same_output": same}
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1], help="output features K")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--name", default="per_feature_aot")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("probe_per_feature_aot: no CUDA device found; this probe needs a GPU", file=sys.stderr)
        return 2
    harness = build_harness()
    harness.harness_norm_act_linear_rows.argtypes = [U64] * 8 + [I64, I64, I64, ctypes.POINTER(I64), F32,
                                                                 I32, I32, I32, I32, U64]  # fmt: skip
    harness.harness_norm_act_linear_rows.restype = ctypes.c_char_p
    device, timer = Device(gpu=True), GraphTimer()
    results = []
    for dtype_name in args.dtypes:
        for k in args.k:
            for kind in ("seed", "shared_affine", "per_feature"):
                results.append(probe(harness, dtype_name, kind, k, device, timer))
            print(json.dumps(results[-1]), flush=True)
    shape = {"N": N, "B": B, "D": D, "activation": "tanh", "out_activation": "relu"}
    save_record(args.out, args.name, record_of("probe_per_feature_aot.py", shape=shape, results=results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
