"""Host time of an eager fused-op call, measured on a CPU (no GPU needed).

Two parts of an eager ``torch.ops.graphopt.norm_act`` call cost host time whatever the device:

* the op's dispatch: the dispatcher, the autograd layer and the Python kernel, timed on a CPU tensor
  with the CPU math replaced by a function that returns its input (so only the dispatch is left);
* the CUDA launch path's Python: from the op's arguments to the call of the compiled kernel's
  launcher, timed on CPU tensors with a stand-in for the compiled Triton kernel whose launch does
  nothing (the general path: ``torch_triton`` + ``torch_launch``'s cached launcher; the planned path:
  ``torch_launch_plans``).

Per-call microseconds, the minimum over many batches of calls (a shared machine adds noise upward only).

    PYTHONPATH=$PWD python3 bench/bench_eager_op_host_cpu.py [--rows 16 --cols 256]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import graphopt  # noqa: F401  (registers torch.ops.graphopt.*)
import graphopt.fused.norm_act.triton_kernel as kernel_module
from graphopt.fused import Activation, Norm, torch_launch, torch_launch_plans, torch_triton
from graphopt.fused.norm_act import torch_impl as norm_act_impl
from graphopt.fused.norm_act import torch_math

EPS = 1e-5


def per_call_us(call, batch: int = 100, batches: int = 100) -> float:
    for _ in range(200):
        call()
    best = float("inf")
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(batch):
            call()
        best = min(best, (time.perf_counter() - start) / batch)
    return round(best * 1e6, 2)


class _Launcher:
    def __getitem__(self, grid):
        return lambda *args: None


class _Kernel:
    """Stands in for ``norm_act_kernel``: the JIT call returns a compiled kernel that launches nothing."""

    arg_names = kernel_module.norm_act_kernel.arg_names

    def __getitem__(self, grid):
        return lambda *args, **kwargs: _Launcher()


def dispatch(x, weight, bias) -> dict[str, float]:
    op = torch.ops.graphopt.norm_act.default
    real = torch_math.norm_act
    torch_math.norm_act = lambda x, *rest: x
    try:
        call = lambda: op(x, weight, bias, "layer", "gelu", EPS, -1)  # noqa: E731
        timings = {"op call (CPU math stubbed)": per_call_us(call)}
        with torch.no_grad():
            timings["op call under no_grad"] = per_call_us(call)
        with torch.inference_mode():
            timings["op call under inference_mode (no autograd key)"] = per_call_us(call)
        body_fn = norm_act_impl.IMPLS["norm_act"].body
        body = lambda: body_fn(x, weight, bias, "layer", "gelu", EPS, -1, None)  # noqa: E731
        timings["the op's body called directly"] = per_call_us(body)
    finally:
        torch_math.norm_act = real
    return timings


def launch_path(x, weight, bias) -> dict[str, float]:
    real, device = kernel_module.norm_act_kernel, torch_launch.current_device
    kernel_module.norm_act_kernel = _Kernel()
    torch_launch.current_device = lambda: 0
    timings = {}
    try:
        general = lambda: norm_act_impl.launch(  # noqa: E731
            x, weight, bias, None, Norm.LAYER, Activation.GELU, EPS, x.dim() - 1, torch_triton.eager_launch
        )
        timings["general path (torch_triton + cached launcher), launch stubbed"] = per_call_us(general)
        plan_device = torch_launch_plans._current_device
        torch_launch_plans._current_device = lambda: None  # (CPU tensors have no device index)
        plans = torch_launch_plans.PlannedLaunches(
            lambda *a, wrap: norm_act_impl.launch(*a, wrap=wrap), torch_triton.eager_launch
        )
        planned = lambda: plans(x, weight, bias, None, Norm.LAYER, Activation.GELU, EPS, x.dim() - 1)  # noqa: E731
        timings["planned path (torch_launch_plans), launch stubbed"] = per_call_us(planned)
    finally:
        kernel_module.norm_act_kernel, torch_launch.current_device = real, device
        torch_launch_plans._current_device = plan_device
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--cols", type=int, default=256)
    args = parser.parse_args()
    if args.rows <= 0 or args.cols <= 0:
        print("--rows and --cols must be positive", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # (tiny tensors: a thread pool only adds noise)
    x, weight, bias = torch.randn(args.rows, args.cols), torch.randn(args.cols), torch.randn(args.cols)
    results = {"torch": torch.__version__, **dispatch(x, weight, bias), **launch_path(x, weight, bias)}
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
