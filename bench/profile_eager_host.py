"""Where an eager call's host time goes: the original and the optimized program of a model, under
torch.profiler, in grad mode (the module called as is) and under no_grad (GPU machine).

    PYTHONPATH=$PWD python3 bench/profile_eager_host.py --models gpt2,bert [--out DIR]

Prints, per model and mode, the ops by total host (CPU) time over 20 calls, and writes the tables to
``--out/eager_host_profile.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt
from bench.bench_torch_parity import MODELS, _on_gpu
from bench.coverage.architectures import randomize_norms

CALLS = 20


def profile(module, inputs, grad: bool) -> str:
    mode = contextlib.nullcontext() if grad else torch.no_grad()
    with mode:
        for _ in range(5):
            module(*inputs)
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(CALLS):
                module(*inputs)
            torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,bert")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    text = []
    for name in args.models.split(","):
        torch.manual_seed(0)
        module, inputs = MODELS[name]()
        randomize_norms(module.eval())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, inputs)
            optimized, _ = graphopt.optimize(program)
        gpu_inputs = tuple(t.cuda() for t in inputs)
        for who, prog in (("original", program), ("graphopt", optimized)):
            moved, _ = _on_gpu(prog, gpu_inputs)
            for grad in (True, False):
                title = f"== {name} {who} {'grad mode' if grad else 'no_grad'} ({CALLS} calls)"
                text += [title, profile(moved, gpu_inputs, grad)]
                print(text[-2], text[-1], sep="\n", flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "eager_host_profile.txt").write_text("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
