"""NormActLinear's rows per program and warps for per-feature and shared operands (GPU).

    python bench/probe_norm_act_linear_blocks.py [--out bench/results/norm_act_linear_blocks.json]

For the per-feature model's shapes (N features of B rows, D columns, K outputs; fp32 and bf16), times
the launch graphopt picks today next to the kernel launched with other (block_m, num_warps), with and
without ``BLOCKWISE`` (one row of each operand per block, the per-row code compiled out), and with
every operand shared (one group) as the baseline. Each time is the median over replays of a CUDA graph
of 20 launches, so launch cost is excluded. Every candidate's output is checked against the launch
graphopt picks. This chose the blockwise and shared shapes in ``norm_act_linear/triton_kernel.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench.norm_act_linear_probe import launch_picked, launch_shape, write_cells

# (features N, rows per feature B, D, K)
SHAPES = ((128, 512, 256, 1), (128, 512, 256, 4), (128, 1024, 256, 4), (32, 512, 1024, 1))
CANDIDATES = ((1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (8, 2), (8, 4), (16, 4), (16, 8))
DTYPES = (torch.float32, torch.bfloat16)


def graph_us(fn, launches: int = 20, replays: int = 15) -> float:
    """Median µs of one launch, from replays of a CUDA graph of ``launches`` launches."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def probe(dtype, n: int, b: int, d: int, k: int, mode: str) -> dict:
    rows, groups = n * b, (1 if mode == "shared" else n)
    rows_of = (b, groups) if groups > 1 else (1, 1)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    ops = (rand(rows, d), rand(groups, d), rand(groups, d), rand(groups, k, d), rand(groups, k), rows_of)
    x = ops[0]
    src, dst = torch.empty_like(x), torch.empty_like(x)
    ref, y = (
        torch.empty(rows, k, device="cuda", dtype=dtype),
        torch.empty(rows, k, device="cuda", dtype=dtype),
    )

    def picked(out):
        return launch_picked(ops, out)

    config = picked(ref)
    result = {
        "dtype": str(dtype).removeprefix("torch."), "features": n, "rows_per_feature": b, "D": d, "K": k,
        "operands": mode, "copy_us": graph_us(lambda: dst.copy_(src)), "picked_tier": config.tier.name,
        "picked_us": graph_us(lambda: picked(y)), "candidates": {},
    }  # fmt: skip
    for block_m, warps in CANDIDATES:
        for blockwise in (False, True) if mode == "per_feature" else (False,):
            name = f"m{block_m}_w{warps}{'_blockwise' if blockwise else ''}"
            y.zero_()
            launch_shape(ops, y, block_m, warps, blockwise, mode == "shared")
            ok = torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-2)
            us = graph_us(
                lambda m=block_m, w=warps, bw=blockwise: launch_shape(ops, y, m, w, bw, mode == "shared")
            )
            result["candidates"][name] = {"us": round(us, 2), "same_output": ok}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/norm_act_linear_blocks.json"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: this probe needs a CUDA GPU", file=sys.stderr)
        return 2
    cells = []
    for dtype in DTYPES:
        for shape in SHAPES:
            for mode in ("shared", "per_feature"):
                cell = probe(dtype, *shape, mode)
                best = min(cell["candidates"].items(), key=lambda kv: kv[1]["us"])
                what = f"{cell['dtype']} N={shape[0]} B={shape[1]} D={shape[2]} K={shape[3]} {mode}"
                picked = f"{cell['picked_tier']} {cell['picked_us']:.1f} µs"
                print(f"{what}: picked {picked}, best {best[0]} {best[1]['us']:.1f} µs", flush=True)
                cells.append(cell)
    write_cells(args.out, "probe_norm_act_linear_blocks.py", cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
