"""GroupNormAct on a GPU: the kernel against a device copy of the same bytes, and diffusion-style
models end to end, in PyTorch and in ONNX Runtime's CUDA EP, before and after graphopt.

Kernel rows (``--part kernels``), at the shapes of diffusion UNets and VAEs, fp32 and fp16, with and
without a residual add in front: GPU time (CUDA profiler, kernels only) of

* ``copy``: a device-to-device copy of as many bytes as the op reads plus writes (the HBM roofline);
* ``graphopt``: ``torch.ops.graphopt.(add_)group_norm_act`` (the Triton kernels, JIT; ``path``: the
  whole kernel, one program per (sample, group), or the split statistics + apply kernels);
* ``torch``: eager ``silu(group_norm(x [+ r]))``, and ``compiled``: the same under torch.compile;
* ``ort_fused``: the single GroupNormAct node in ORT's CUDA EP (the library's AOT kernel), and
  ``ort_original``: what torch.onnx.export (dynamo) writes for it, in ORT's CUDA EP without the library.

Inputs rotate through copies larger than L2 in all, so every row is timed from HBM.

Model rows (``--part models``): small random-initialized UNet and VAE decoder (models/diffusion_blocks.py)
at a few sizes: start-to-finish time of one synchronized call (the median of rounds that interleave the
original's calls with the optimized one's, and its noise) of the original and the optimized
model in ORT's CUDA EP (exported with dynamo=True; the optimized one with the library registered) and in
PyTorch eager (torch.export program before and after graphopt, on the GPU), with the fusion counts.

Writes ``group_norm.json`` and ``group_norm.md`` into ``--out``. ``--part tiers`` instead times the kernel
at each block shape of ``SWEEP`` on every shape (launched directly), for tuning the tier table, and
writes ``group_norm_tiers.json``; bench/bench_group_norm_split.py tunes the split path's rule and
block shapes.

    ln -sfn ../passes graphopt/passes   # (a source checkout, as bench/run_gpu.sh does)
    GRAPHOPT_ORT_LIBRARY=<libgraphopt_ort.so with CUDA kernels> PYTHONPATH=$PWD \\
        python3 bench/bench_group_norm.py --out bench/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch  # before onnxruntime, so CUDA libraries resolve the same way

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.benchmark.ort_cuda import ort_cuda_callable
from graphopt.benchmark.rounds import interleaved_us
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us
from graphopt.fused import register_torch_ops
from graphopt.fused.group_norm_act import launch_rule
from models.diffusion_blocks import TinyUNet, TinyVAEDecoder, randomize_norms, unet_inputs, vae_inputs
from models.onnx_export import export_dynamo

F = torch.nn.functional
# (N, C, H, W, groups): SD 1.5 UNet levels at 512x512 (latents 64x64), its VAE decoder at 256x256
# output, and the small models' shapes.
SHAPES = (
    (2, 320, 64, 64, 32),
    (2, 640, 32, 32, 32),
    (2, 1280, 16, 16, 32),
    (1, 512, 128, 128, 32),
    (1, 256, 256, 256, 32),
    (8, 128, 32, 32, 32),
    (2, 64, 16, 16, 8),
    (8, 320, 64, 64, 32),  # batch 8: 256 (sample, group) runs, where the split stops
)
DTYPES = {"float32": torch.float32, "float16": torch.float16}
ONNX_TYPES = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16}
L2_ROTATION_BYTES = 256 << 20


def copies_past_l2(nbytes: int) -> int:
    return max(1, -(-L2_ROTATION_BYTES // max(nbytes, 1)))


def rotating(calls_inputs: list, fn):
    turn = [0]

    def call():
        turn[0] = (turn[0] + 1) % len(calls_inputs)
        return fn(*calls_inputs[turn[0]])

    return call


def _fused_model(shape, groups, dtype, residual: bool, scale, bias) -> onnx.ModelProto:
    elem = ONNX_TYPES[dtype]
    inputs = [helper.make_tensor_value_info("x", elem, list(shape))]
    node_inputs = ["x", "scale", "bias"]
    outputs = [helper.make_tensor_value_info("y", elem, list(shape))]
    node_outputs = ["y"]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", elem, list(shape)))
        node_inputs.append("r")
        outputs.append(helper.make_tensor_value_info("s", elem, list(shape)))
        node_outputs.append("s")
    node = helper.make_node(
        "GroupNormAct", node_inputs, node_outputs, domain="graphopt", groups=groups, activation="silu",
        epsilon=1e-5,
    )  # fmt: skip
    weights = [numpy_helper.from_array(t.cpu().numpy(), n) for t, n in ((scale, "scale"), (bias, "bias"))]
    graph = helper.make_graph([node], "group_norm_act", inputs, outputs, weights)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("graphopt", 1)], ir_version=10
    )
    graphopt.fused.attach_functions(model)
    return model


class _Reference(torch.nn.Module):
    def __init__(self, channels, groups, residual):
        super().__init__()
        self.norm = torch.nn.GroupNorm(groups, channels)
        self.residual = residual

    def forward(self, x, r=None):
        s = x + r if self.residual else x
        y = F.silu(self.norm(s))
        return (y, s) if self.residual else y


def kernel_row(shape, dtype_name, residual, bandwidth, compile_too, ort_too=True) -> dict:
    n, c, h, w, groups = shape
    dtype = DTYPES[dtype_name]
    ops = register_torch_ops()
    nbytes = (
        n * c * h * w * (torch.finfo(dtype).bits // 8) * (4 if residual else 2)
    )  # X [R] read, Y [S] written
    rotation = copies_past_l2(nbytes)
    sets = [
        tuple(torch.randn(n, c, h, w, device="cuda", dtype=dtype) for _ in range(1 + residual))
        for _ in range(rotation)
    ]
    scale = (1 + 0.3 * torch.randn(c, device="cuda")).to(dtype)
    bias = (0.3 * torch.randn(c, device="cuda")).to(dtype)
    split = launch_rule.split_launch(
        n * groups, c // groups * h * w, h * w, dtype_name, (c // groups * h * w) % 16 == 0
    )
    row = {
        "shape": [n, c, h, w],
        "groups": groups,
        "dtype": dtype_name,
        "residual": residual,
        "bytes": nbytes,
        "path": "whole" if split is None else f"split {split.chunks}x{split.chunk}",
    }
    half = nbytes // 2 // 4
    copies = [(torch.empty(half, device="cuda"), torch.empty(half, device="cuda")) for _ in range(rotation)]
    row["copy_us"] = gpu_us(rotating(copies, lambda a, b: b.copy_(a)))
    row["roofline_us"] = nbytes / bandwidth * 1e6

    def fused_op(x, r=None):
        if r is None:
            return ops.group_norm_act(x, scale, bias, groups, "silu", 1e-5)
        return ops.add_group_norm_act(x, r, scale, bias, groups, "silu", 1e-5)

    row["graphopt_us"] = gpu_us(rotating(sets, fused_op))
    module = _Reference(c, groups, residual).eval()
    with torch.no_grad():
        module.norm.weight.copy_(scale.float().cpu())
        module.norm.bias.copy_(bias.float().cpu())
    on_gpu = module.to("cuda", dtype)
    with torch.no_grad():
        expected, got = on_gpu(*sets[0]), fused_op(*sets[0])
        if residual:
            expected, got = expected[0], got[0]
        row["max_abs_difference"] = float((expected.float() - got.float()).abs().max())
        row["torch_us"] = gpu_us(rotating(sets, on_gpu))
        if compile_too:
            compiled = torch.compile(on_gpu)
            compiled(*sets[0])
            row["compiled_us"] = gpu_us(rotating(sets, compiled))
    if not ort_too:
        return row
    feeds = [dict(zip(("x", "r"), s, strict=False)) for s in sets]
    fused_onnx = _fused_model((n, c, h, w), groups, dtype, residual, scale, bias)
    call = ort_cuda_callable(fused_onnx, feeds[0], cuda_graph=False, with_library=True, rotate=feeds[1:])
    row["ort_fused_us"] = gpu_us(call)
    # What torch.onnx.export (dynamo) writes for the same module, in the storage dtype (export traces
    # with fake tensors: a float16 module exports on the CPU).
    cpu_module = _Reference(c, groups, residual).eval()
    cpu_module.load_state_dict(module.state_dict())
    original = export_dynamo(cpu_module.to(dtype), tuple(t.cpu() for t in sets[0]))
    call = ort_cuda_callable(original, feeds[0], cuda_graph=False, with_library=False, rotate=feeds[1:])
    row["ort_original_us"] = gpu_us(call)
    return row


# (block_n, num_warps, looped) tried by ``--part tiers`` on every shape: what the tier table could hold.
SWEEP = (
    (1024, 4, True), (2048, 4, True), (4096, 8, True), (8192, 8, True), (8192, 16, True), (16384, 16, True),
    (8192, 16, False), (16384, 16, False), (16384, 32, False), (32768, 32, False),
)  # fmt: skip


def tier_rows(shape, dtype_name) -> list[dict]:
    """GPU time of the kernel at each (block, warps, looped) of SWEEP that holds the run, launched
    directly (not through the tier table), beside a copy of the same bytes."""
    from graphopt.fused.group_norm_act.triton_kernel import group_norm_act_kernel

    n, c, h, w, groups = shape
    dtype = DTYPES[dtype_name]
    group_size = c // groups * h * w
    nbytes = n * c * h * w * (torch.finfo(dtype).bits // 8) * 2
    rotation = copies_past_l2(nbytes)
    xs = [torch.randn(n, c, h, w, device="cuda", dtype=dtype) for _ in range(rotation)]
    y = torch.empty_like(xs[0])
    scale, bias = torch.ones(c, device="cuda", dtype=dtype), torch.zeros(c, device="cuda", dtype=dtype)
    half = nbytes // 2 // 4
    copies = [(torch.empty(half, device="cuda"), torch.empty(half, device="cuda")) for _ in range(rotation)]
    rows = [{"shape": list(shape[:4]), "groups": groups, "dtype": dtype_name, "config": "copy",
             "us": gpu_us(rotating(copies, lambda a, b: b.copy_(a)))}]  # fmt: skip
    for block, warps, looped in SWEEP:
        if not looped and block < group_size:
            continue

        def launch(x, block=block, warps=warps, looped=looped):
            group_norm_act_kernel[(n * groups,)](
                x, x, scale, bias, y, y, groups, group_size, h * w, 1e-5, 5, 1, 1, 0, 0,
                BLOCK_N=block, LOOPED=looped, num_warps=warps,
            )  # fmt: skip

        config = f"b{block}_w{warps}_{'loop' if looped else 'one'}"
        rows.append({"shape": list(shape[:4]), "groups": groups, "dtype": dtype_name, "config": config,
                     "us": gpu_us(rotating([(x,) for x in xs], launch))})  # fmt: skip
    return rows


def _start_to_finish(original, optimized) -> dict:
    """Start-to-finish µs of one synchronized call of each, timed together in interleaved rounds
    (graphopt.benchmark.rounds), with each one's noise: timed one after the other, a drift of the host
    once made an optimized model that saved 30% of GPU time read 0.71x."""
    before, after = interleaved_us([original, optimized], synchronize=torch.cuda.synchronize)
    return {
        "original_us": before.median_us, "optimized_us": after.median_us,
        "original_noise": before.noise, "optimized_noise": after.noise,
    }  # fmt: skip


def _model_rows(name, module, args, dtype_name) -> list[dict]:
    """The model in ORT's CUDA EP and in PyTorch, before and after graphopt."""
    rows = []
    model = export_dynamo(module, args)
    optimized, report = graphopt.optimize(model)
    counts = {k: v for k, v in report.rule_counts.items() if "group_norm" in k}
    feeds = {i.name: a.to("cuda") for i, a in zip(model.graph.input, args, strict=False)}
    before = ort_cuda_callable(model, feeds, cuda_graph=False, with_library=False)
    after = ort_cuda_callable(optimized, feeds, cuda_graph=False, with_library=True)
    shapes = [list(a.shape) for a in args]
    rows.append({
        "model": name, "dtype": dtype_name, "runtime": "ort_cuda", "input": shapes, "fusions": counts,
        **_start_to_finish(before, after),
        "original_gpu_us": gpu_us(before), "optimized_gpu_us": gpu_us(after),
    })  # fmt: skip
    program = torch.export.export(module, args)
    optimized_program, report = graphopt.optimize(program)
    original = program.module().to("cuda")
    rewritten = optimized_program.module().to("cuda")
    inputs = tuple(a.to("cuda") for a in args)
    with torch.no_grad():
        difference = float((original(*inputs) - rewritten(*inputs)).abs().max())
        rows.append({
            "model": name, "dtype": dtype_name, "runtime": "torch_eager", "input": shapes,
            "fusions": {k: v for k, v in report.rule_counts.items() if "group_norm" in k},
            "max_abs_difference": difference,
            **_start_to_finish(lambda: original(*inputs), lambda: rewritten(*inputs)),
            "original_gpu_us": gpu_us(lambda: original(*inputs)),
            "optimized_gpu_us": gpu_us(lambda: rewritten(*inputs)),
        })  # fmt: skip
    return rows


MODELS = {
    "unet_c32_s16_b2": lambda: (TinyUNet(32, 8), unet_inputs(2, 16)),
    "unet_c128_s64_b2": lambda: (TinyUNet(128, 32), unet_inputs(2, 64)),
    "unet_c128_s32_b8": lambda: (TinyUNet(128, 32), unet_inputs(8, 32)),
    "vae_c64_s32_b1": lambda: (TinyVAEDecoder(64, 32), vae_inputs(1, 32)),
    "vae_c128_s64_b1": lambda: (TinyVAEDecoder(128, 32), vae_inputs(1, 64)),
}


def _markdown(result: dict) -> str:
    lines = [f"# GroupNormAct on {result['device']} ({result['date']}, torch {result['torch']})", ""]
    lines += ["## Kernels (GPU µs; copy = a device copy of the same bytes)", ""]
    head = (
        "shape",
        "G",
        "dtype",
        "res",
        "path",
        "copy",
        "graphopt",
        "÷copy",
        "torch",
        "compiled",
        "ort fused",
        "ort orig",
    )
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["kernels"]:

        def fmt(key, row=r):
            value = row.get(key)
            return "-" if value is None else f"{value:.1f}"

        ratio = r["graphopt_us"] / r["copy_us"] if r.get("graphopt_us") and r.get("copy_us") else None
        shape = "x".join(map(str, r["shape"]))
        lines.append(
            f"| {shape} | {r['groups']} | {r['dtype']} | {'y' if r['residual'] else 'n'} "
            f"| {r.get('path', '-')} "
            f"| {fmt('copy_us')} | {fmt('graphopt_us')} | {'-' if ratio is None else f'{ratio:.2f}'} "
            f"| {fmt('torch_us')} | {fmt('compiled_us')} | {fmt('ort_fused_us')} | {fmt('ort_original_us')} |"
        )
    lines += [
        "",
        "## Models (start to finish µs of one synchronized call, median of interleaved rounds ± noise;",
        "GPU µs in parentheses)",
        "",
    ]
    lines += [
        "| model | dtype | runtime | fusions | original | optimized | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["models"]:
        speedup = r["original_us"] / r["optimized_us"]
        lines.append(
            f"| {r['model']} | {r['dtype']} | {r['runtime']} | {sum(r['fusions'].values())} "
            f"| {r['original_us']:.0f} ±{r['original_noise']:.0%} ({r['original_gpu_us'] or 0:.0f}) "
            f"| {r['optimized_us']:.0f} ±{r['optimized_noise']:.0%} ({r['optimized_gpu_us'] or 0:.0f}) "
            f"| {speedup:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--part", choices=("kernels", "models", "tiers", "all"), default="all")
    parser.add_argument(
        "--shapes",
        type=lambda text: tuple(tuple(int(v) for v in s.split(",")) for s in text.split(";")),
        default=SHAPES,
        help='kernel rows\' shapes "N,C,H,W,groups;..." (default: the diffusion shapes above)',
    )
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    parser.add_argument(
        "--no-ort", action="store_true", help="skip the ONNX Runtime columns (no onnxruntime-gpu)"
    )
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated names of MODELS")
    parser.add_argument("--model-dtypes", default="float32,float16", help="storage types of the model rows")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_group_norm: needs a CUDA GPU")
    bandwidth = copy_bandwidth_bytes_per_s()
    result = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "copy_bandwidth_gb_s": bandwidth / 1e9,
        "kernels": [],
        "models": [],
        "tiers": [],
    }
    if args.part == "tiers":
        for shape in args.shapes:
            for dtype_name in DTYPES:
                for row in tier_rows(shape, dtype_name):
                    print(json.dumps(row), flush=True)
                    result["tiers"].append(row)
    if args.part in ("kernels", "all"):
        for shape in args.shapes:
            for dtype_name in DTYPES:
                for residual in (False, True):
                    row = kernel_row(
                        shape, dtype_name, residual, bandwidth, not args.no_compile, not args.no_ort
                    )
                    print(json.dumps(row), flush=True)
                    result["kernels"].append(row)
    if args.part in ("models", "all"):
        for name in args.models.split(","):
            for dtype_name in args.model_dtypes.split(","):
                torch.manual_seed(0)
                module, inputs = MODELS[name]()
                module = randomize_norms(module.eval()).to(DTYPES[dtype_name])
                inputs = tuple(t.to(DTYPES[dtype_name]) for t in inputs)
                for row in _model_rows(name, module, inputs, dtype_name):
                    print(json.dumps(row), flush=True)
                    result["models"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "group_norm_tiers" if args.part == "tiers" else "group_norm"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2))
    if args.part != "tiers":
        (args.out / f"{name}.md").write_text(_markdown(result))
        print(_markdown(result))


if __name__ == "__main__":
    main()
