"""NormActLinear programs of several consecutive row blocks, for shared and per-feature operands (GPU).

    python bench/probe_norm_act_linear_iters.py [--out bench/results/norm_act_linear_iters.json]

At the seed's and the per-feature model's launches (N features of B rows, D columns, K outputs; fp32 and
bf16), times the launch graphopt picks today next to the kernel launched with other (block_m, num_warps,
iters): a program of ``iters`` consecutive blocks loads scale and bias once and each next block before
it finishes the current one. Per-feature operands are launched blockwise (a program's rows inside one
feature); shared ones as the shared variant. Each time is the median over replays of a CUDA graph of 20
launches, so launch cost is excluded; every candidate's output is checked against the picked launch's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench.norm_act_linear_probe import launch_picked, launch_shape, write_cells
from bench.probe_norm_act_linear_blocks import graph_us

# (features N, rows per feature B, D, K)
SHAPES = ((128, 512, 256, 1), (128, 512, 256, 4), (32, 512, 1024, 1))
# (block_m, num_warps, iters)
CANDIDATES = (
    (2, 1, 1), (4, 1, 1), (8, 2, 1), (2, 1, 2), (2, 1, 4),
    (4, 1, 2), (4, 1, 4), (8, 2, 2), (4, 2, 4), (8, 1, 2),
)  # fmt: skip
DTYPES = (torch.float32, torch.bfloat16)


def probe(dtype, n: int, b: int, d: int, k: int, mode: str) -> dict:
    rows, groups = n * b, (1 if mode == "shared" else n)
    rows_of = (b, groups) if groups > 1 else (1, 1)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    # Every launch reads one X, as the blocks probe's do (so the numbers compare); bf16 X at D = 1024
    # (32 MiB) partly stays in an H100's L2 between launches.
    ops = (rand(rows, d), rand(groups, d), rand(groups, d), rand(groups, k, d), rand(groups, k), rows_of)
    x = ops[0]
    src, dst = torch.empty_like(x), torch.empty_like(x)
    ref = torch.empty(rows, k, device="cuda", dtype=dtype)
    y = torch.empty_like(ref)
    config = launch_picked(ops, ref)
    result = {
        "dtype": str(dtype).removeprefix("torch."), "features": n, "rows_per_feature": b, "D": d, "K": k,
        "operands": mode, "copy_us": graph_us(lambda: dst.copy_(src)), "picked_tier": config.tier.name,
        "picked_us": graph_us(lambda: launch_picked(ops, y)), "candidates": {},
    }  # fmt: skip
    shared, blockwise = mode == "shared", mode == "per_feature"
    for block_m, warps, iters in CANDIDATES:
        name = f"m{block_m}_w{warps}_i{iters}"
        y.fill_(float("nan"))
        launch_shape(ops, y, block_m, warps, blockwise, shared, iters)
        ok = bool(torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-2))
        us = graph_us(lambda m=block_m, w=warps, i=iters: launch_shape(ops, y, m, w, blockwise, shared, i))
        result["candidates"][name] = {"us": round(us, 2), "same_output": ok}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/norm_act_linear_iters.json"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: this probe needs a CUDA GPU", file=sys.stderr)
        return 2
    cells = []
    for dtype in DTYPES:
        for shape in SHAPES:
            for mode in ("shared", "per_feature"):
                cell = probe(dtype, *shape, mode)
                ranked = sorted(cell["candidates"].items(), key=lambda kv: kv[1]["us"])[:3]
                best = ", ".join(
                    f"{name} {c['us']:.2f}{'' if c['same_output'] else ' WRONG'}" for name, c in ranked
                )
                what = f"{cell['dtype']} N={shape[0]} B={shape[1]} D={shape[2]} K={shape[3]} {mode}"
                picked = f"{cell['picked_tier']} {cell['picked_us']:.2f}"
                print(f"{what}: copy {cell['copy_us']:.2f}, picked {picked}; best {best}", flush=True)
                cells.append(cell)
    write_cells(args.out, "probe_norm_act_linear_iters.py", cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
