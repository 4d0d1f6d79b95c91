"""Where one ONNX Runtime CUDA EP run of the seed spends its time, node by node, on a GPU machine.

Start-to-finish through ONNX Runtime is the runtime's per-run cost plus each node's host time (shape
checks, allocation, the launch) plus the GPU time; ORT's profiler splits the first two. The script runs
the seed's original, horizontally batched and optimized ONNX models, and a one-Relu model (the floor),
through IO binding on CUDA tensors, and prints the median model_run time and each node's median host
time over the profiled runs.

    python bench/ort_run_profile.py [--runs 200] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch  # before onnxruntime, so CUDA libraries resolve the same way

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx

import graphopt
from graphopt.benchmark.compare import VERTICAL_PASSES
from graphopt.benchmark.floors import one_relu_model
from graphopt.benchmark.ort_cuda import ort_cuda_callable

SEED = Path(__file__).resolve().parent.parent / "models" / "split_stack.onnx"


def profile(model: onnx.ModelProto, feeds: dict[str, torch.Tensor], runs: int, with_library: bool) -> dict:
    import onnxruntime as ort

    call = ort_cuda_callable(model, feeds, cuda_graph=False, with_library=with_library)
    session = call.session
    for _ in range(20):
        call()
    # A second session with profiling on, bound the same way (profiling is a session option).
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.log_severity_level = 3
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    if with_library:
        from graphopt.ort import library_path

        options.register_custom_ops_library(library_path())
    del session
    profiled = ort.InferenceSession(model.SerializeToString(), options, providers=["CUDAExecutionProvider"])
    binding = profiled.io_binding()
    for name, tensor in feeds.items():
        binding.bind_input(name, "cuda", 0, _np(tensor), list(tensor.shape), tensor.data_ptr())
    for output in profiled.get_outputs():
        binding.bind_output(output.name, "cuda")
    for _ in range(runs):
        profiled.run_with_iobinding(binding)
    events = json.loads(Path(profiled.end_profiling()).read_text())
    runs_us = [e["dur"] for e in events if e.get("name") == "model_run"][20:]
    nodes: dict[str, list[float]] = defaultdict(list)
    providers: dict[str, str] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            name = event["name"][: -len("_kernel_time")]
            nodes[name].append(event["dur"])
            providers[name] = f"{event['args'].get('op_name')} on {event['args'].get('provider')}"
    return {
        "model_run_median_us": statistics.median(runs_us) if runs_us else None,
        "nodes": {
            name: {"where": providers[name], "host_median_us": statistics.median(durs[20:] or durs)}
            for name, durs in nodes.items()
        },
    }


def _np(tensor):
    import numpy as np

    return {torch.float32: np.float32, torch.float16: np.float16}[tensor.dtype]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    original = onnx.load(SEED)
    batched, _ = graphopt.optimize(original, skip=VERTICAL_PASSES)
    optimized, _ = graphopt.optimize(original)
    (name,) = [i.name for i in original.graph.input]
    dims = [d.dim_value for d in original.graph.input[0].type.tensor_type.shape.dim]
    feeds = {name: torch.randn(dims, device="cuda")}
    x = torch.randn(4, device="cuda")
    results = {
        "floor: one Relu": profile(one_relu_model(), {"x": x}, args.runs, False),
        "original": profile(original, feeds, args.runs, False),
        "horizontal only": profile(batched, feeds, args.runs, False),
        "optimized (graphopt library)": profile(optimized, feeds, args.runs, True),
    }
    results["device"] = torch.cuda.get_device_name()
    for label, result in results.items():
        if label == "device":
            continue
        print(f"{label}: model_run median {result['model_run_median_us']:.1f} µs")
        for node, info in result["nodes"].items():
            print(f"    {node:<60} {info['where']:<45} {info['host_median_us']:>7.1f} µs")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ort_run_profile.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
