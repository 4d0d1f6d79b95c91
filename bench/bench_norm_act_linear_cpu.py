"""NormActLinear on ONNX Runtime's CPU EP (the custom-op library's kernel) against ONNX Runtime's own
LayerNormalization → activation → MatMul → Add on the same inputs, in the same process, at 1 and 2
intra-op threads: the check behind the "never slower in any runtime" rule for the CPU kernel.

    PYTHONPATH=. python bench/bench_norm_act_linear_cpu.py [--dims 32,64,128,256,768] [--ks 1,...,16]
        [--rows 64,4096] [--threads 1,2] [--dtypes float32,float16] [--activation relu]
        [--library NAME=PATH ...] [--rounds 9] [--out bench/results/DIR] [--name NAME]
    PYTHONPATH=. python bench/bench_norm_act_linear_cpu.py --merge RUN.json ... --out DIR --name NAME

Each ``--library`` adds a fused session built on that libgraphopt_ort.so (default: the one
``graphopt.ort.library_path()`` finds), so a kernel before and after a change is timed side by side.
Weights, scale and biases are initializers in both graphs (ONNX Runtime pre-packs a constant MatMul
operand). bfloat16 has no CPU kernels in ONNX Runtime (Relu, MatMul): its unfused row is the float32
graph between two Casts, the nearest graph ONNX Runtime runs. Every session's output is checked against
the unfused graph before timing. Timing: calls on bound inputs and outputs (I/O binding), batches of
calls long enough (~10 ms) to swamp the clock, the sessions of a case interleaved in ``--rounds``
rounds; the median per-call time over rounds is reported, with its spread (max - min over median).
``--merge`` combines whole runs of one grid (on a shared machine, each run sees other load): each
session's time is the median of the runs' times, its spread theirs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graphopt.fused import DOMAIN, DOMAIN_VERSION
from graphopt.ort import library_path

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ONNX_ACT = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid"}


def _ints(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _params(rng, d: int, k: int, dtype: str) -> dict[str, np.ndarray]:
    """Storage-rounded float32 parameters: scale, bias, weight [K, D], linear bias."""
    values = {
        "scale": 1.0 + 0.1 * rng.standard_normal(d),
        "bias": 0.1 * rng.standard_normal(d),
        "weight": rng.standard_normal((k, d)) / np.sqrt(d),
        "linear_bias": rng.standard_normal(k),
    }
    return {name: v.astype(NUMPY[dtype]).astype(np.float32) for name, v in values.items()}


def _tensor(name: str, values: np.ndarray, dtype: str) -> onnx.TensorProto:
    if dtype == "bfloat16":
        t = numpy_helper.from_array(values.astype(ml_dtypes.bfloat16).view(np.uint16), name)
        t.data_type = TensorProto.BFLOAT16
        return t
    return numpy_helper.from_array(values.astype(NUMPY[dtype]), name)


def _model(nodes, inits, d: int, k: int, io_elem: int, domain: bool) -> bytes:
    graph = helper.make_graph(
        nodes, "nal_cpu", [helper.make_tensor_value_info("x", io_elem, ["n", d])],
        [helper.make_tensor_value_info("y", io_elem, ["n", k])], initializer=inits,
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(DOMAIN, DOMAIN_VERSION)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


def fused_model(p, d, k, dtype, activation) -> bytes:
    """One NormActLinear node; bfloat16 takes and returns float32 through Casts (numpy has no
    bfloat16 ONNX Runtime's binding accepts), as the unfused bfloat16 graph does."""
    cast = dtype == "bfloat16"
    x, y = ("xs", "ys") if cast else ("x", "y")
    nodes = [helper.make_node("Cast", ["x"], ["xs"], to=ELEM[dtype])] if cast else []
    nodes.append(helper.make_node(
        "NormActLinear", [x, "scale", "bias", "weight", "linear_bias"], [y], domain=DOMAIN,
        norm="layer", activation=activation, out_activation="identity", epsilon=1e-5,
    ))  # fmt: skip
    nodes += [helper.make_node("Cast", ["ys"], ["y"], to=TensorProto.FLOAT)] if cast else []
    inits = [_tensor(n, p[n], dtype) for n in ("scale", "bias", "weight", "linear_bias")]
    return _model(nodes, inits, d, k, TensorProto.FLOAT if cast else ELEM[dtype], True)


def unfused_model(p, d, k, dtype, activation) -> bytes:
    """LayerNormalization, the activation, MatMul by Weight^T and Add, in `dtype` (bfloat16: in
    float32 between Casts, see the module's doc)."""
    compute = "float32" if dtype == "bfloat16" else dtype
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["h"], axis=-1, epsilon=1e-5)]
    if activation == "identity":
        nodes[0].output[0] = "a"
    else:
        nodes.append(helper.make_node(ONNX_ACT[activation], ["h"], ["a"]))
    nodes += [helper.make_node("MatMul", ["a", "weight_t"], ["mm"]),
              helper.make_node("Add", ["mm", "linear_bias"], ["y"])]  # fmt: skip
    inits = [_tensor(n, p[n], compute) for n in ("scale", "bias", "linear_bias")]
    inits.append(_tensor("weight_t", np.ascontiguousarray(p["weight"].T), compute))
    if dtype == "bfloat16":  # round-trip X and Y through bfloat16 as the fused graph stores them
        nodes = [helper.make_node("Cast", ["x"], ["x16"], to=ELEM[dtype]),
                 helper.make_node("Cast", ["x16"], ["x32"], to=TensorProto.FLOAT), *nodes]  # fmt: skip
        nodes[2].input[0] = "x32"
        nodes[-1].output[0] = "y32"
        nodes += [helper.make_node("Cast", ["y32"], ["y16"], to=ELEM[dtype]),
                  helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT)]  # fmt: skip
    return _model(nodes, inits, d, k, ELEM[compute], False)


class Runner:
    """A session with X and Y bound once, so a call is one run_with_iobinding."""

    def __init__(self, model: bytes, threads: int, library: str | None, x: np.ndarray, k: int):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        if library:
            options.register_custom_ops_library(library)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.x = ort.OrtValue.ortvalue_from_numpy(x)
        self.y = ort.OrtValue.ortvalue_from_numpy(np.zeros((x.shape[0], k), x.dtype))
        self.binding = self.session.io_binding()
        self.binding.bind_ortvalue_input("x", self.x)
        self.binding.bind_ortvalue_output("y", self.y)

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def output(self) -> np.ndarray:
        self()
        return self.y.numpy().astype(np.float64)


def time_case(runners: dict[str, Runner], rounds: int, batch_s: float) -> dict[str, dict]:
    for run in runners.values():  # warm-up: allocations, first-touch, thread pool spin-up
        for _ in range(3):
            run()
    calls = {}
    for name, run in runners.items():
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < batch_s / 4 or n < 2:
            run()
            n += 1
        per_call = (time.perf_counter() - start) / n
        calls[name] = max(2, int(batch_s / max(per_call, 1e-7)))
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                run()
            times[name].append((time.perf_counter() - start) / calls[name] * 1e6)
    out = {}
    for name, values in times.items():
        median = statistics.median(values)
        out[name] = {"us": median, "spread": (max(values) - min(values)) / median, "calls": calls[name]}
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def ratio(times: dict, name: str) -> float:
    """A session's time over ONNX Runtime's: the median of the runs' ratios where runs were merged."""
    return times[name].get("ratio", times[name]["us"] / times["ort"]["us"])


def write_markdown(record: dict, path: Path) -> None:
    libs = record["libraries"]
    head = ["dtype", "D", "K", "rows", "threads", "ORT µs", *[f"{n} µs" for n in libs]]
    head += [f"{n} / ORT" for n in libs] + ["spread"]
    runs = record.get("runs")
    how = f"times the median of {len(runs)} runs, each the median of" if runs else "median of"
    lines = [
        f"# NormActLinear on ONNX Runtime's CPU EP vs its unfused graph ({record['date']})",
        "",
        f"{record['device']}; onnxruntime {record['onnxruntime']}; activation {record['activation']}; "
        f"{how} {record['rounds']} interleaved rounds (spread: max - min over the median, the largest "
        "of the row's sessions)" + ("; ratios the median of the runs' ratios." if runs else "."),
        "",
        *(f"`{command}`" for command in (runs or [record["command"]])),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for c in record["cases"]:
        t = c["times"]
        cells = [c["dtype"], *(str(c[key]) for key in ("d", "k", "rows", "threads")), f"{t['ort']['us']:.1f}"]
        cells += [f"{t[n]['us']:.1f}" for n in libs] + [f"{ratio(t, n):.2f}" for n in libs]
        cells.append(f"±{100 * max(v['spread'] for v in t.values()):.0f}%")
        lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def run_case(dtype, d, k, rows, threads, activation, libraries, rng, rounds, batch_s) -> dict:
    """One (dtype, D, K, rows, threads): the unfused graph and each library's fused node, checked
    against each other, then timed."""
    p = _params(rng, d, k, dtype)
    x = rng.standard_normal((rows, d)).astype(NUMPY[dtype])
    x = x.astype(np.float32) if dtype == "bfloat16" else x
    runners = {"ort": Runner(unfused_model(p, d, k, dtype, activation), threads, None, x, k)}
    for name, path in libraries.items():
        runners[name] = Runner(fused_model(p, d, k, dtype, activation), threads, path, x, k)
    want = runners["ort"].output()
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}[dtype]
    for name in libraries:
        got = runners[name].output()
        if not np.allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max()))):
            diff = np.abs(got - want).max()
            raise SystemExit(
                f"{name} differs from ONNX Runtime at {dtype} D={d} K={k} rows={rows} by {diff:.3g}"
            )
    times = time_case(runners, rounds, batch_s)
    return {"dtype": dtype, "d": d, "k": k, "rows": rows, "threads": threads, "times": times}


def merge(paths: list[Path]) -> dict:
    """One record of several runs of the same grid, each session's time the median of the runs'."""
    records = [json.loads(path.read_text()) for path in paths]
    merged = dict(records[0], runs=[r["command"] for r in records], cases=[])
    for cases in zip(*(r["cases"] for r in records), strict=True):
        times = {}
        for name in cases[0]["times"]:
            values = [c["times"][name]["us"] for c in cases]
            median = statistics.median(values)
            times[name] = {"us": median, "spread": (max(values) - min(values)) / median, "runs": values}
            if name != "ort":  # (each run's ratio is side by side; the median of those, not of times)
                times[name]["ratio"] = statistics.median(
                    c["times"][name]["us"] / c["times"]["ort"]["us"] for c in cases
                )
        merged["cases"].append(dict(cases[0], times=times))
    return merged


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=_ints, default=[32, 64, 128, 256, 768])
    parser.add_argument("--ks", type=_ints, default=list(range(1, 17)))
    parser.add_argument("--rows", type=_ints, default=[64, 4096])
    parser.add_argument("--threads", type=_ints, default=[1, 2])
    parser.add_argument("--dtypes", type=lambda s: s.split(","), default=["float32"])
    parser.add_argument("--activation", default="relu", choices=["identity", *ONNX_ACT])
    parser.add_argument("--library", action="append", default=[], help="NAME=PATH of a libgraphopt_ort.so")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-ms", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=None, help="folder for NAME.json and NAME.md")
    parser.add_argument("--name", default="norm_act_linear_cpu")
    parser.add_argument("--merge", type=Path, nargs="+", help="records of runs to combine (no timing)")
    args = parser.parse_args(argv)
    if args.merge:
        record = merge(args.merge)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n")
        write_markdown(record, args.out / f"{args.name}.md")
        return
    libraries = dict(s.split("=", 1) for s in args.library) or {"fused": library_path()}
    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": f"{_cpu_name()}, {len(os.sched_getaffinity(0))} cores available",
        "onnxruntime": ort.__version__,
        "activation": args.activation,
        "rounds": args.rounds,
        "command": shlex.join(["python", *sys.argv]),
        "libraries": libraries,
        "cases": [],
    }
    rng = np.random.default_rng(0)
    grid = [(t, d, k, r, n) for t in args.dtypes for d in args.dims for k in args.ks for r in args.rows
            for n in args.threads]  # fmt: skip
    for dtype, d, k, rows, threads in grid:
        batch_s = args.batch_ms / 1e3
        case = run_case(dtype, d, k, rows, threads, args.activation, libraries, rng, args.rounds, batch_s)
        record["cases"].append(case)
        t = case["times"]
        ratios = " ".join(f"{n} {t[n]['us']:8.1f} ({t[n]['us'] / t['ort']['us']:.2f})" for n in libraries)
        line = f"{dtype:8s} D={d:4d} K={k:2d} rows={rows:5d} t={threads} ort {t['ort']['us']:8.1f} {ratios}"
        print(line, flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n")
            write_markdown(record, args.out / f"{args.name}.md")


if __name__ == "__main__":
    main()
