"""NormActLinear's rows per program and warps at the shapes its models use (GPU).

    python bench/probe_norm_act_linear_early.py [--out bench/results/norm_act_linear_early.json]

Where the kernel loads operands in flight with a block's rows (``EARLY_OPERAND_COLS``: fp32 per-feature
launches on short rows), every candidate does. For the seed's shape, the per-feature model's and the
width grid's (K = 4), this times the launch graphopt picks next to the kernel at other (block_m,
num_warps). Calls walk through enough distinct inputs that none is read from L2
(``bench.widths_timing``), each time is the median over replays of one CUDA graph, and every
candidate's output is checked against the launch graphopt picks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from triton import next_power_of_2

from bench.norm_act_linear_probe import launch_picked, launch_shape, write_cells
from bench.widths_timing import Device, GraphTimer, copy_buffers, copy_calls

# (name, features N, rows per feature B, D, K, operands)
CELLS = (
    ("seed", 128, 512, 256, 1, "shared"),
    ("per_feature", 128, 512, 256, 1, "per_feature"),
    ("per_feature", 128, 512, 256, 4, "per_feature"),
    ("widths", 1, 16384, 256, 4, "shared"),
    ("widths", 1, 16384, 768, 4, "shared"),
    ("widths", 1, 16384, 1024, 4, "shared"),
    ("widths", 1, 65536, 768, 4, "shared"),
)
# (block_m, num_warps): short rows (D <= 256) and wider ones
SHORT_SHAPES = ((1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (4, 2), (8, 2))
WIDE_SHAPES = ((1, 1), (2, 1), (4, 1), (1, 2), (2, 2), (1, 4), (2, 4))
MAX_VALUES_PER_THREAD = 128  # larger tiles spill: not worth compiling


def graph_us(calls, timer: GraphTimer) -> float:
    graph, _ = GraphTimer.capture(calls)
    return timer.replay_us(graph, len(calls))


def probe(dtype, device: Device, timer: GraphTimer, name, n, b, d, k, mode) -> dict:
    rows, groups = n * b, (1 if mode == "shared" else n)
    rows_of = (b, groups) if groups > 1 else (1, 1)
    size = torch.finfo(dtype).bits // 8
    plan = device.plan(rows * (d + k) * size, check=False)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    xs = [rand(rows, d) for _ in range(plan.sets)]
    params = (rand(groups, d), rand(groups, d), rand(groups, k, d) * d**-0.5, rand(groups, k))
    ys = [torch.empty(rows, k, device="cuda", dtype=dtype) for _ in range(plan.sets)]
    at = [j % plan.sets for j in range(plan.calls)]

    def picked(i):
        return launch_picked((xs[i], *params, rows_of), ys[i])

    config = picked(0)
    ref = ys[0].clone()
    srcs, dsts = copy_buffers(rows * (d + k) * size, plan, device)
    copy_us = min(graph_us(calls, timer) for calls in copy_calls(srcs, dsts, at).values())
    result = {
        "cell": name, "dtype": str(dtype).removeprefix("torch."), "features": n, "rows_per_feature": b,
        "D": d, "K": k, "operands": mode, "copy_us": round(copy_us, 2), "picked_tier": config.tier.name,
        "picked_us": round(graph_us([lambda i=i: picked(i) for i in at], timer), 2), "candidates": {},
    }  # fmt: skip
    for block_m, warps in SHORT_SHAPES if d <= 256 else WIDE_SHAPES:
        if block_m * next_power_of_2(d) > MAX_VALUES_PER_THREAD * 32 * warps:
            continue
        blockwise = mode == "per_feature"
        ops = (xs[0], *params, rows_of)
        ys[0].fill_(float("nan"))
        launch_shape(ops, ys[0], block_m, warps, blockwise, mode == "shared")
        ok = torch.allclose(ys[0].float(), ref.float(), rtol=1e-2, atol=1e-2)
        calls = [
            lambda i=i, m=block_m, w=warps, bw=blockwise: launch_shape(
                (xs[i], *params, rows_of), ys[i], m, w, bw, mode == "shared"
            )
            for i in at
        ]
        tag = f"m{block_m}_w{warps}"
        result["candidates"][tag] = {"us": round(graph_us(calls, timer), 2), "same_output": ok}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/norm_act_linear_early.json"))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: this probe needs a CUDA GPU", file=sys.stderr)
        return 2
    device, timer = Device(gpu=True), GraphTimer()
    cells = []
    for dtype in (getattr(torch, name) for name in args.dtypes):
        for cell in CELLS:
            result = probe(dtype, device, timer, *cell)
            best = min(result["candidates"].items(), key=lambda kv: kv[1]["us"])
            what = f"{result['dtype']} {cell}"
            picked = f"{result['picked_tier']} {result['picked_us']:.1f} µs"
            copy = f"copy {result['copy_us']:.1f}"
            print(f"{what}: {copy}, picked {picked}, best {best[0]} {best[1]['us']:.1f} µs", flush=True)
            cells.append(result)
    write_cells(args.out, "probe_norm_act_linear_early.py", cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
