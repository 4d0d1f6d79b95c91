"""torchvision CNNs through torch.export, before and after graphopt (batch norms folded into convs).

For ResNet-18, MobileNetV3-small and EfficientNet-B0 (random weights, eval mode) at one input size:
the batch norms in the program before and after, the fold counts, the largest difference of the outputs,
and the median time of one synchronized call of the original and the optimized program, eager and
under torch.compile, on the device given. Writes ``cnn_batch_norm.json`` into ``--out``.

    ln -sfn ../passes graphopt/passes   # (a source checkout, as bench/run_gpu.sh does)
    PYTHONPATH=$PWD python3 bench/bench_cnn_batch_norm.py --out bench/results --device cuda --size 224
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

import torch

import graphopt

MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0")


def _calls(program) -> Counter:
    return Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def _time(fn, x, device: str, repeats: int) -> float:
    with torch.no_grad():
        for _ in range(5):
            fn(x)
        times = []
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn(x)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def measure(name: str, size: int, batch: int, device: str, repeats: int, compile_too: bool) -> dict:
    import torchvision

    torch.manual_seed(0)
    module = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(batch, 3, size, size)
    program = torch.export.export(module, (x,))
    optimized, report = graphopt.optimize(program)
    before, after = _calls(program), _calls(optimized)
    row = {
        "model": name,
        "input": [batch, 3, size, size],
        "batch_norms_before": sum(n for op, n in before.items() if "batch_norm" in op),
        "batch_norms_after": sum(n for op, n in after.items() if "batch_norm" in op),
        "folds": report.rule_counts.get("fold_batch_norm_into_conv", 0),
        "calls_before": sum(before.values()),
        "calls_after": sum(after.values()),
        "verified": report.verification["ok"],
    }
    original = program.module().to(device)
    rewritten = optimized.module().to(device)
    xd = x.to(device)
    with torch.no_grad():
        row["max_abs_difference"] = float((original(xd) - rewritten(xd)).abs().max())
    row["eager_us"] = {
        "original": _time(original, xd, device, repeats),
        "optimized": _time(rewritten, xd, device, repeats),
    }
    if compile_too:
        row["compiled_us"] = {
            "original": _time(torch.compile(original), xd, device, repeats),
            "optimized": _time(torch.compile(rewritten), xd, device, repeats),
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    rows = [
        measure(name, args.size, args.batch, args.device, args.repeats, not args.no_compile)
        for name in MODELS
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "cnn_batch_norm.json"
    path.write_text(json.dumps({"device": args.device, "torch": torch.__version__, "rows": rows}, indent=2))
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
