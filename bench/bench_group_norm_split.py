"""Tuning GroupNormAct's split path on a GPU: where it should take over from the whole kernel (the
rule's ``min_cols`` and ``max_rows``) and with which block shape (graphopt/fused/group_norm_act/
launch_rule.py).

For each shape of a grid of run counts (rows = N * groups) and run lengths (group_size), fp32 and
fp16, without a residual, it times (GPU µs from the profiler, inputs rotated past L2 as in
bench_group_norm.py): a device copy of the same bytes, the whole kernel (the split turned off), and
the split kernels at each (block_n, num_warps, max_chunks) of ``CONFIGS`` whatever the rule says.
It prints and writes ``group_norm_split_<dtypes>.json`` and ``.md``: per shape the whole kernel,
the best split and the rule's current choice, each over the copy.

    PYTHONPATH=$PWD python3 bench/bench_group_norm_split.py --out bench/results --dtypes float16
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_group_norm import copies_past_l2, rotating
from graphopt.benchmark.timing import gpu_us
from graphopt.fused.group_norm_act import launch_rule
from graphopt.fused.group_norm_act.triton_kernel import launch_group_norm_act
from graphopt.kernels.launch_rules import Tier

ROWS = (8, 16, 32, 64, 128, 256, 512)
GROUP_SIZES = (2048, 4096, 8192, 16384, 40960, 262144)
SPATIAL = 1024  # (32 x 32: the channel of an element changes within a block, as at most UNet levels)
CONFIGS = ((2048, 4, 64), (4096, 4, 64), (4096, 8, 64), (8192, 8, 64), (4096, 8, 32), (4096, 8, 128))
DTYPES = {"float32": torch.float32, "float16": torch.float16}


@contextlib.contextmanager
def split_tiers(tiers: tuple[Tier, ...]):
    """The launcher's split tiers replaced by ``tiers`` (none: the whole kernel everywhere)."""
    kept = launch_rule.split_tiers
    launch_rule.split_tiers = lambda dtype: tiers
    try:
        yield
    finally:
        launch_rule.split_tiers = kept


def forced(block_n: int, warps: int, chunks: int) -> tuple[Tier, ...]:
    return (Tier(2**62, 1, block_n, warps, looped=True, aligned=True, max_chunks=chunks),)


def shape_of(rows: int, group_size: int, spatial: int = SPATIAL) -> tuple[tuple[int, ...], int]:
    """An [N, C, S] shape of ``rows`` runs of ``group_size`` elements, 32 groups where rows allow."""
    groups = min(rows, 32)
    spatial = min(spatial, group_size)
    return (rows // groups, groups * (group_size // spatial), spatial), groups


def time_rows(rows: int, group_size: int, dtype_name: str, spatial: int = SPATIAL) -> dict:
    dtype = DTYPES[dtype_name]
    shape, groups = shape_of(rows, group_size, spatial)
    nbytes = 2 * rows * group_size * torch.finfo(dtype).bits // 8
    sets = [(torch.randn(shape, device="cuda", dtype=dtype),) for _ in range(copies_past_l2(nbytes))]
    scale = torch.randn(shape[1], device="cuda", dtype=dtype)
    bias = torch.randn(shape[1], device="cuda", dtype=dtype)
    y = torch.empty_like(sets[0][0])

    def launch(x):
        launch_group_norm_act(x, scale, bias, None, y, None, groups=groups, activation=5, eps=1e-5)

    half = nbytes // 2 // 4
    copies = [(torch.empty(half, device="cuda"), torch.empty(half, device="cuda")) for _ in sets]
    row = {
        "rows": rows,
        "group_size": group_size,
        "dtype": dtype_name,
        "shape": list(shape),
        "groups": groups,
    }
    row["copy_us"] = gpu_us(rotating(copies, lambda a, b: b.copy_(a)))
    rule = launch_rule.split_launch(rows, group_size, shape[-1], dtype_name, group_size % 16 == 0)
    row["rule"] = (
        "whole" if rule is None else f"n{rule.tier.block_n}_w{rule.tier.num_warps}_c{rule.tier.max_chunks}"
    )
    with split_tiers(()):
        row["whole_us"] = gpu_us(rotating(sets, launch))
    row["split_us"] = {}
    for block_n, warps, chunks in CONFIGS:
        with split_tiers(forced(block_n, warps, chunks)):
            row["split_us"][f"n{block_n}_w{warps}_c{chunks}"] = gpu_us(rotating(sets, launch))
    return row


def markdown(result: dict) -> str:
    lines = [
        f"# GroupNormAct split tuning on {result['device']} ({result['date']}, torch {result['torch']})",
        "",
    ]
    lines += ["GPU µs; ÷copy in parentheses; `rule`: what launch_rule.py picks now.", ""]
    lines += [
        "| dtype | rows | group_size | copy | whole | best split | rule |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        best = min(r["split_us"], key=r["split_us"].get)

        def ratio(us, row=r):
            return f"{us:.1f} ({us / row['copy_us']:.2f})"

        lines.append(
            f"| {r['dtype']} | {r['rows']} | {r['group_size']} | {r['copy_us']:.1f} | {ratio(r['whole_us'])} "
            f"| {best}: {ratio(r['split_us'][best])} | {r['rule']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated: float32,float16")
    parser.add_argument("--rows", default=",".join(map(str, ROWS)), help="comma-separated run counts")
    parser.add_argument(
        "--group-sizes", default=",".join(map(str, GROUP_SIZES)), help="comma-separated run lengths"
    )
    parser.add_argument(
        "--spatial", type=int, default=SPATIAL,
        help="elements per channel (4096: a 64x64 map, where each block lies within one channel)",
    )  # fmt: skip
    parser.add_argument("--name", default="", help="the output files' name (default from the dtypes)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_group_norm_split: needs a CUDA GPU")
    result = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "command": " ".join(sys.argv),
        "rows": [],
    }
    for dtype_name in args.dtypes.split(","):
        for rows in map(int, args.rows.split(",")):
            for group_size in map(int, args.group_sizes.split(",")):
                row = time_rows(rows, group_size, dtype_name, args.spatial)
                print(json.dumps(row), flush=True)
                result["rows"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.name or f"group_norm_split_{args.dtypes.replace(',', '_')}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2))
    (args.out / f"{name}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
