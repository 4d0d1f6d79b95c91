"""Times NormAct's head-and-tail shapes (a row of 2^a + 2^b columns read as two unmasked tiles) at
several warp counts, next to the tier the launch rule picks and a device copy of the same bytes, on
one GPU through Triton's JIT (LayerNorm with scale and bias, GELU).

    python bench/probe_two_piece.py [--cases float32:12288 bfloat16:12288 ...] [--warps 8 16 32] [--out FILE]

Each time is the median of ``triton.testing.do_bench`` over distinct inputs (enough copies that a
call reads from HBM, not L2).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from bench.bench_kernels import copies_needed
from bench.widths_candidates import two_pieces
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act.triton_kernel import launch_norm_act, norm_act_config, norm_act_kernel

ROWS = 16384


def probe(dtype_name: str, cols: int, warps: list[int]) -> dict:
    dtype = getattr(torch, dtype_name)
    head, tail = two_pieces(cols)
    count = copies_needed(2 * ROWS * cols * dtype.itemsize)
    xs = [torch.randn(ROWS, cols, device="cuda").to(dtype) for _ in range(count)]
    w, b = torch.randn(cols, device="cuda").to(dtype), torch.randn(cols, device="cuda").to(dtype)
    y = torch.empty_like(xs[0])
    turn = [0]

    def x():
        turn[0] = (turn[0] + 1) % count
        return xs[turn[0]]

    def shape(num_warps):
        def call():
            norm_act_kernel[(ROWS,)](
                x(), x(), w, b, y, y, ROWS, cols, cols, cols, 1e-5, int(Norm.LAYER), int(Activation.GELU),
                1, 1, 0, 1, 1, 1, 1, 1, ROWS,
                BLOCK_M=1, BLOCK_N=head, ITERS=1, LOOPED=False, EVEN=True, SHARED=True, TAIL_N=tail,
                num_warps=num_warps,
            )  # fmt: skip

        return call

    def shipped():
        launch_norm_act(
            x(), w, b, None, y, None, norm=int(Norm.LAYER), activation=int(Activation.GELU), eps=1e-5
        )

    calls = {f"two_piece_w{n}": shape(n) for n in warps}
    calls[f"shipped_{norm_act_config(ROWS, cols, dtype_name).tier.name}"] = shipped
    calls["copy"] = lambda: y.copy_(x())
    out = {"dtype": dtype_name, "D": cols, "head": head, "tail": tail}
    for name, call in calls.items():
        call()
        torch.cuda.synchronize()
        out[name] = round(triton.testing.do_bench(call, warmup=5, rep=50, return_mode="median") * 1e3, 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["float32:12288", "bfloat16:12288", "float16:12288"])
    parser.add_argument("--warps", nargs="+", type=int, default=[16, 32])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = []
    for case in args.cases:
        dtype_name, cols = case.split(":")
        results.append(probe(dtype_name, int(cols), args.warps))
        print(json.dumps(results[-1]), flush=True)
    if args.out:
        record = {
            "device": torch.cuda.get_device_name(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python bench/probe_two_piece.py " + " ".join(sys.argv[1:]),
            "rows": ROWS,
            "unit": "µs per call (median)",
            "results": results,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
