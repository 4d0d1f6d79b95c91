"""ONNX Runtime CUDA EP before and after graphopt, in one run, on a GPU machine:

* norm → activation (rows = 16384, D ∈ {256, 1024, 4096, 8192}, fp32 and fp16, GELU and tanh): ORT's own
  LayerNormalization + activation vs graphopt's NormAct kernel (the library registered), against the HBM
  roofline (bytes read + written ÷ measured copy bandwidth);
* where the fused node runs: ORT's profile must show NormAct on the CUDA EP and no Memcpy nodes.

Inputs rotate through copies larger than L2 in all, so small sizes are timed from HBM.

    python bench/bench_ort_cuda.py [--out bench/results]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

import torch  # before onnxruntime, so CUDA libraries resolve the same way

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from onnx import TensorProto

import graphopt
from bench.onnx_models import norm_act
from graphopt.benchmark.ort_cuda import ort_cuda_callable
from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us, start_to_finish_us

ROWS = 16384
DTYPES = {"float32": (TensorProto.FLOAT, torch.float32), "float16": (TensorProto.FLOAT16, torch.float16)}


def profiled_placement(model, feeds) -> dict:
    import onnxruntime as ort

    from graphopt.ort import library_path

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    options.register_custom_ops_library(library_path())
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CUDAExecutionProvider"])
    session.run(None, {k: v.cpu().numpy() for k, v in feeds.items()})
    events = json.loads(Path(session.end_profiling()).read_text())
    nodes = {}
    for event in events:
        args = event.get("args", {})
        if event.get("cat") == "Node" and "provider" in args:
            nodes[args.get("op_name", event["name"])] = args["provider"]
    return {"providers": nodes, "memcpy_nodes": sorted(n for n in nodes if n.startswith("Memcpy"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--iters", type=int, default=100)
    args = parser.parse_args()
    bandwidth = copy_bandwidth_bytes_per_s()
    rows = []
    for dtype_name, (elem_type, torch_dtype) in DTYPES.items():
        for d in (256, 1024, 4096, 8192):
            for activation in ("gelu", "tanh"):
                model = norm_act(ROWS, d, activation, elem_type)
                optimized, _ = graphopt.optimize(model, verify=False)
                x = torch.randn(ROWS, d, device="cuda").to(torch_dtype)
                # Enough input copies to overflow L2 (50 MB on an H100), bound in turn.
                copies = [
                    {"x": x.clone()}
                    for _ in range(max(0, -(-256 * 2**20 // (x.numel() * x.element_size())) - 1))
                ]
                roofline = 2 * x.numel() * x.element_size() / bandwidth * 1e6
                row = {
                    "dtype": dtype_name,
                    "D": d,
                    "activation": activation,
                    "roofline_us": round(roofline, 2),
                }
                for label, candidate, library in (("ort", model, False), ("graphopt", optimized, True)):
                    try:
                        call = ort_cuda_callable(
                            candidate, {"x": x}, cuda_graph=False, with_library=library, rotate=copies
                        )
                        output = call().float()
                        row[f"{label}_gpu_us"] = round(gpu_us(call), 2)
                        row[f"{label}_s2f_us"] = round(start_to_finish_us(call, iters=args.iters), 1)
                        if label == "ort":
                            reference = output.clone()
                        else:
                            row["max_abs_diff"] = float((output - reference).abs().max())
                    except Exception as error:  # record, keep measuring the rest
                        row[f"{label}_error"] = f"{type(error).__name__}: {error}"[:300]
                if "graphopt_gpu_us" in row:
                    row["graphopt_over_roofline"] = round(row["graphopt_gpu_us"] / roofline, 3)
                if "ort_gpu_us" in row:
                    row["ort_over_roofline"] = round(row["ort_gpu_us"] / roofline, 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
    optimized, _ = graphopt.optimize(norm_act(ROWS, 1024, "gelu"), verify=False)
    placement_check = profiled_placement(optimized, {"x": torch.randn(ROWS, 1024)})
    record = {
        "benchmark": "ORT CUDA EP: LayerNormalization + activation vs graphopt NormAct (rows=16384)",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "copy_bandwidth_TBps": round(bandwidth / 1e12, 3),
        "rows": rows,
        "placement_of_fused_model": placement_check,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ort_cuda_norm_act.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        f"# ORT CUDA EP: norm → activation before/after graphopt ({record['device']}, {record['date']})",
        "",
        f"rows = {ROWS}; GPU µs from the CUDA profiler; roofline = bytes read + written at "
        f"{record['copy_bandwidth_TBps']} TB/s (measured copy). `python bench/bench_ort_cuda.py`",
        "",
        "| dtype | D | act | roofline µs | ORT µs | ORT ×roof | graphopt µs | graphopt ×roof | max diff |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dtype']} | {r['D']} | {r['activation']} | {r['roofline_us']} "
            f"| {r.get('ort_gpu_us', r.get('ort_error'))} "
            f"| {r.get('ort_over_roofline', '-')} | {r.get('graphopt_gpu_us', r.get('graphopt_error'))} "
            f"| {r.get('graphopt_over_roofline', '-')} | {r.get('max_abs_diff', '-')} |"
        )
    lines += ["", f"Fused model placement: {json.dumps(placement_check)}"]
    (args.out / "ort_cuda_norm_act.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
