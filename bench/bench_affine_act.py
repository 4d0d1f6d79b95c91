"""GPU benchmark of AffineAct (Y = act(X * Scale + Bias) along one channel axis) at the shapes real
models give it, against a device copy of the same bytes, and of moving a linear layer's bias out of
its GEMM into the fused activation.

Run from the repository root on a machine with a CUDA GPU (graphopt from the source checkout):

    PYTHONPATH=. python3 bench/bench_affine_act.py --out OUT [--quick]

1. Kernel: per shape and dtype, the fused kernel (``torch.ops.graphopt.affine_act``, eager), a
   ``copy_`` of X into Y (the same bytes read and written: the target is fused <= 1.10x copy), the
   unfused eager PyTorch ops it replaces, and torch.compile of them. Shapes: the MLP hidden layer of
   BERT-base / GPT-2 (8 x 512 tokens x 3072), Whisper-base's encoder (8 x 1500 x 2048), and batch norms
   of CNNs at 224 px (ResNet-18's 64 x 56 x 56, MobileNetV3's 576 x 7 x 7 and 16 x 112 x 112,
   EfficientNet-B0's 1280 x 7 x 7; batch 32). Each output is checked against the float64 reference.
2. Split: ``linear(x, W, b) → gelu`` (cuBLAS bias epilogue + a GELU kernel) against
   ``linear(x, W) → affine_act(bias, gelu)`` in eager PyTorch at BERT-base sizes: whether
   ``fuse_bias_act.SPLIT_LINEAR_BIAS`` pays.

Writes affine_act.json and affine_act.md to --out. End to end, the models through every runtime are
``bench/bench_real_models.py --models gpt2,bert,whisper_encoder`` and ``bench/bench_cnn_batch_norm.py``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_kernels import GpuTimer, copies_needed, measure_copy_bandwidth
from graphopt.fused import register_torch_ops
from graphopt.fused.affine_act.spec import AFFINE_ACT
from graphopt.fused.spec import Activation
from graphopt.fused.torch_math import activate

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
TARGET_VS_COPY = 1.10
# name: (shape, axis, activation, scale?)
SHAPES = {
    "bert_mlp": ((8, 512, 3072), -1, "gelu", False),
    "gpt2_mlp": ((8, 512, 3072), -1, "gelu_tanh", False),
    "whisper_mlp": ((8, 1500, 2048), -1, "gelu", False),
    "resnet18_bn": ((32, 64, 56, 56), 1, "relu", True),
    "mobilenet_bn_wide": ((32, 576, 7, 7), 1, "relu", True),
    "mobilenet_bn_tall": ((32, 16, 112, 112), 1, "relu", True),
    "efficientnet_bn": ((32, 1280, 7, 7), 1, "silu", True),
}
QUICK = ("bert_mlp", "resnet18_bn", "efficientnet_bn")


def unfused(x, scale, bias, activation: Activation, axis: int):
    """The ops AffineAct replaces, as the model runs them: a multiply, an add, the activation."""
    shape = [1] * x.dim()
    shape[axis] = -1
    z = x
    if scale is not None:
        z = z * scale.view(shape)
    z = z + bias.view(shape)
    return activate(activation, z)


def check(name, y, x, scale, bias, activation, axis, dtype):
    rows = torch.arange(0, x.shape[0], max(1, x.shape[0] // 4), device=x.device)
    ref = AFFINE_ACT.reference(
        x[rows].double().cpu().numpy(),
        None if scale is None else scale.double().cpu().numpy(),
        bias.double().cpu().numpy(),
        activation=activation.attr,
        axis=axis,
    )
    got = y[rows].double().cpu().numpy()
    error = float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))
    if not error <= TOLERANCE[dtype]:
        raise AssertionError(f"{name}: error {error:.2e} beyond {TOLERANCE[dtype]}")
    return error


def bench_shape(name, dtype_name, timer, bandwidth, use_compile):
    shape, axis, act_name, with_scale = SHAPES[name]
    dtype, activation = DTYPES[dtype_name], Activation.parse(act_name)
    ops = register_torch_ops()
    channels = shape[axis]
    nbytes = 2 * int(np.prod(shape)) * torch.finfo(dtype).bits // 8
    copies = copies_needed(nbytes)
    xs = [torch.randn(shape, device="cuda", dtype=dtype) * 3 for _ in range(copies)]
    ys = [torch.empty_like(x) for x in xs]
    scale = (torch.rand(channels, device="cuda") + 0.5).to(dtype) if with_scale else None
    bias = torch.randn(channels, device="cuda").to(dtype)
    fused_error = check(
        name, ops.affine_act(xs[0], scale, bias, act_name, axis), xs[0], scale, bias, activation, axis, dtype
    )
    times = {
        "fused": timer([lambda x=x: ops.affine_act(x, scale, bias, act_name, axis) for x in xs]),
        "copy": timer([lambda x=x, y=y: y.copy_(x) for x, y in zip(xs, ys, strict=True)]),
        "eager": timer([lambda x=x: unfused(x, scale, bias, activation, axis) for x in xs]),
    }
    if use_compile:
        compiled = torch.compile(lambda x: unfused(x, scale, bias, activation, axis))
        compiled(xs[0])
        times["compile"] = timer([lambda x=x: compiled(x) for x in xs])
    row = {
        "shape": name,
        "dims": list(shape),
        "axis": axis,
        "activation": act_name,
        "dtype": dtype_name,
        "roofline_us": nbytes / bandwidth * 1e6,
        "error": fused_error,
        "gpu_us": {k: t.gpu_us for k, t in times.items()},
        "call_us": {k: t.call_us for k, t in times.items()},
    }
    row["fused_vs_copy"] = row["gpu_us"]["fused"] / row["gpu_us"]["copy"]
    return row


def bench_split(dtype_name, timer, tokens=4096, d=768, hidden=3072):
    dtype = DTYPES[dtype_name]
    ops = register_torch_ops()
    weight = torch.randn(hidden, d, device="cuda", dtype=dtype) * d**-0.5
    bias = torch.randn(hidden, device="cuda", dtype=dtype)
    xs = [
        torch.randn(tokens, d, device="cuda", dtype=dtype) for _ in range(copies_needed(tokens * hidden * 4))
    ]
    kept = timer([lambda x=x: F.gelu(F.linear(x, weight, bias)) for x in xs])
    split = timer([lambda x=x: ops.affine_act(F.linear(x, weight), None, bias, "gelu", -1) for x in xs])
    return {
        "dtype": dtype_name,
        "tokens": tokens,
        "d": d,
        "hidden": hidden,
        "gpu_us": {"linear_bias_then_gelu": kept.gpu_us, "linear_then_affine_act": split.gpu_us},
        "call_us": {"linear_bias_then_gelu": kept.call_us, "linear_then_affine_act": split.call_us},
    }


def markdown(rows, splits, meta) -> str:
    lines = [
        f"# AffineAct, {meta['device']}, {meta['date']}",
        "",
        f"- copy bandwidth {meta['copy_TBps']:.2f} TB/s",
        f"- target: fused GPU time <= {TARGET_VS_COPY}x a copy of the same bytes",
        "",
        "| shape | dtype | act | fused µs | copy µs | fused/copy | eager µs | compile µs | roofline µs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g = r["gpu_us"]
        cells = [
            f"{r['shape']} {r['dims']} axis {r['axis']}", r["dtype"], r["activation"], f"{g['fused']:.1f}",
            f"{g['copy']:.1f}", f"{r['fused_vs_copy']:.2f}", f"{g['eager']:.1f}",
            f"{g.get('compile', float('nan')):.1f}", f"{r['roofline_us']:.1f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Linear bias kept in the GEMM vs moved into AffineAct (eager, GPU µs per call):",
        "",
        "| dtype | tokens x d → hidden | linear(b) → gelu | linear → affine_act(b, gelu) |",
        "|---|---|---|---|",
    ]
    for s in splits:
        g = s["gpu_us"]
        size = f"{s['tokens']} x {s['d']} → {s['hidden']}"
        kept, split = g["linear_bias_then_gelu"], g["linear_then_affine_act"]
        lines.append(f"| {s['dtype']} | {size} | {kept:.1f} | {split:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="three shapes, fewer repetitions")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_affine_act: no CUDA device found; this benchmark needs a GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    timer = GpuTimer(reps=30 if args.quick else 100, warmup=5 if args.quick else 20)
    bandwidth = measure_copy_bandwidth(timer, 1024 * 2**20)
    meta = {
        "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "copy_TBps": bandwidth / 1e12,
    }
    rows = []
    for name in QUICK if args.quick else SHAPES:
        for dtype_name in DTYPES:
            row = bench_shape(name, dtype_name, timer, bandwidth, not args.no_compile)
            rows.append(row)
            g = row["gpu_us"]
            print(
                f"{name} {dtype_name}: fused {g['fused']:.1f} µs, copy {g['copy']:.1f} µs "
                f"({row['fused_vs_copy']:.2f}x), eager {g['eager']:.1f} µs",
                flush=True,
            )
    splits = [bench_split(d, timer) for d in DTYPES]
    for s in splits:
        print(f"split {s['dtype']}: {s['gpu_us']}", flush=True)
    worst = max(r["fused_vs_copy"] for r in rows)
    summary = {"worst_fused_vs_copy": worst, "target": TARGET_VS_COPY, "target_met": worst <= TARGET_VS_COPY}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "affine_act.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "kernel": rows, "split": splits}, indent=2)
    )
    (args.out / "affine_act.md").write_text(markdown(rows, splits, meta))
    print(f"worst fused/copy {worst:.2f} (target {TARGET_VS_COPY}); wrote {args.out}/affine_act.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
