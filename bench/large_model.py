"""A model over 2 GB (external data) through ``graphopt optimize``: its peak memory against its weights.

    python bench/large_model.py                     # 2.4 GB of float32 weights; figures in bench/results/
    python bench/large_model.py --matrices 2        # a quicker 0.5 GB run

The model is generated straight into its external data file, 64 MiB at a time: x[1, D] through
``--matrices`` MatMuls by D×D weights (with Relu between them), then a layer norm spelled out in
elementwise ops and a GELU, which the optimizer turns into one fused NormAct. ``graphopt optimize``
(numeric check on: the original and the optimized model run in ONNX Runtime one after the other)
runs as a child process whose peak resident memory (``ru_maxrss`` from ``wait4``) is the figure; so
does ``graphopt verify`` of the two. Then the optimized model's weights are compared with the
original's, byte for byte, and every file the run made is deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
WIDTH = 8192
CHUNK_ROWS = 2048  # rows of a weight generated at a time (64 MiB at D = 8192)


def generate(folder: Path, matrices: int, width: int = WIDTH) -> tuple[Path, int]:
    """Writes big.onnx and big.onnx.data; returns the model path and the weights' size in bytes."""
    data_path = folder / "big.onnx.data"
    rng = np.random.default_rng(0)
    initializers, offset = [], 0
    with open(data_path, "wb") as data:
        for index in range(matrices):
            for start in range(0, width, CHUNK_ROWS):
                rows = min(CHUNK_ROWS, width - start)
                block = rng.standard_normal((rows, width), dtype=np.float32)
                block *= np.float32(1.0 / np.sqrt(width))  # (activations keep their size layer after layer)
                data.write(block.tobytes())
            initializers.append(_external(f"w{index}", [width, width], offset, width * width * 4))
            offset += width * width * 4
    nodes, x = [], "x"
    for index in range(matrices):
        nodes.append(helper.make_node("MatMul", [x, f"w{index}"], [f"h{index}"], name=f"matmul{index}"))
        x = f"h{index}"
        if index < matrices - 1:
            nodes.append(helper.make_node("Relu", [x], [f"r{index}"], name=f"relu{index}"))
            x = f"r{index}"
    small = [
        helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5]),
        helper.make_tensor("axes", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        helper.make_tensor("sqrt2", TensorProto.FLOAT, [], [float(np.sqrt(2.0))]),
    ]
    nodes += [  # layer norm and exact GELU, as the TorchScript exporter spells them
        helper.make_node("ReduceMean", [x, "axes"], ["mean"], name="ln/mean"),
        helper.make_node("Sub", [x, "mean"], ["centered"], name="ln/sub"),
        helper.make_node("Mul", ["centered", "centered"], ["square"], name="ln/square"),
        helper.make_node("ReduceMean", ["square", "axes"], ["var"], name="ln/var"),
        helper.make_node("Add", ["var", "eps"], ["shifted"], name="ln/eps"),
        helper.make_node("Sqrt", ["shifted"], ["std"], name="ln/sqrt"),
        helper.make_node("Div", ["centered", "std"], ["normed"], name="ln/div"),
        helper.make_node("Div", ["normed", "sqrt2"], ["scaled"], name="gelu/div"),
        helper.make_node("Erf", ["scaled"], ["erf"], name="gelu/erf"),
        helper.make_node("Add", ["erf", "one"], ["plus"], name="gelu/add"),
        helper.make_node("Mul", ["normed", "plus"], ["product"], name="gelu/mul"),
        helper.make_node("Mul", ["product", "half"], ["y"], name="gelu/half"),
    ]
    graph = helper.make_graph(
        nodes,
        "large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        initializers + small,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    return path, offset


def _external(name: str, dims: list[int], offset: int, length: int) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, dims=dims, data_type=TensorProto.FLOAT)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "big.onnx.data"), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def run_measured(command: list[str]) -> tuple[int, int, float, str]:
    """(exit code, peak RSS in bytes, seconds, stderr) of a child process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, cwd=REPO)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    return child.returncode, usage.ru_maxrss * 1024, time.perf_counter() - started, stderr  # (KiB on Linux)


def same_weights(original: Path, optimized: Path) -> bool:
    """Every initializer of the original that the optimized model keeps holds the same bytes."""
    from graphopt.frontends.onnx_read import read_onnx

    def tensors(path: Path) -> dict[str, np.ndarray]:
        model = read_onnx(path)
        found = {}
        for tensor in model.graph.initializer:
            info = {e.key: e.value for e in tensor.external_data}
            if tensor.data_location == TensorProto.EXTERNAL:
                found[tensor.name] = np.memmap(
                    path.parent / info["location"],
                    np.uint8,
                    "r",
                    int(info.get("offset", 0)),
                    int(info["length"]),
                )
        return found

    before, after = tensors(original), tensors(optimized)
    kept = [name for name in before if name in after]
    return bool(kept) and all(np.array_equal(before[n], after[n]) for n in kept)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--matrices", type=int, default=9, help="D×D float32 weights (9 at D=8192: 2.4 GB)")
    parser.add_argument("--width", type=int, default=WIDTH)
    parser.add_argument("--folder", type=Path, default=None, help="where to generate (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS / "large_model.json")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="graphopt-large-", dir=args.folder) as folder:
        folder = Path(folder)
        started = time.perf_counter()
        model, weights = generate(folder, args.matrices, args.width)
        generated = time.perf_counter() - started
        output = folder / "big.opt.onnx"
        command = [sys.executable, "-m", "graphopt.cli", "optimize", str(model), "-o", str(output)]
        command += ["--report-json", str(folder / "report.json"), "--quiet"]
        code, peak, seconds, stderr = run_measured(command)
        if code != 0:
            print(stderr, file=sys.stderr)
            return 1
        report = json.loads((folder / "report.json").read_text())
        verify_code, verify_peak, verify_seconds, _ = run_measured(
            [sys.executable, "-m", "graphopt.cli", "verify", str(model), str(output)]
        )
        baseline = run_measured([sys.executable, "-c", "import graphopt.cli, graphopt.api, onnxruntime"])[1]
        identical = same_weights(model, output)
        written = sum(p.stat().st_size for p in folder.glob("big.opt.onnx*"))
    record = {
        "what": "graphopt optimize of a generated model with external data, numeric check on",
        "weights_bytes": weights,
        "weights_gb": round(weights / 1e9, 3),
        "peak_rss_bytes": peak,
        "peak_rss_gb": round(peak / 1e9, 3),
        "ratio_peak_to_weights": round(peak / weights, 3),
        "limit_ratio": 1.5,
        "interpreter_and_libraries_rss_gb": round(baseline / 1e9, 3),
        "verify_command": {
            "exit_code": verify_code,
            "peak_rss_gb": round(verify_peak / 1e9, 3),
            "ratio_peak_to_weights": round(verify_peak / weights, 3),
            "seconds": round(verify_seconds, 1),
        },
        "seconds_generate": round(generated, 1),
        "seconds_optimize": round(seconds, 1),
        "seconds_by_step": report["seconds"],
        "verification": report["verification"]["summary"],
        "ops_before": report["ops"]["before"],
        "ops_after": report["ops"]["after"],
        "weights_identical_after_round_trip": identical,
        "written_bytes": written,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "memory_gb": _memory_gb()},
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    fine = identical and verify_code == 0 and max(peak, verify_peak) <= 1.5 * weights
    return 0 if fine else 1


def _memory_gb() -> float:
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)


if __name__ == "__main__":
    sys.exit(main())
