"""NormAct on ONNX Runtime's CPU EP (the custom-op library's kernel) against ONNX Runtime's own
LayerNormalization → activation on the same inputs, in the same process, one intra-op thread: the
check behind the "never slower in any runtime" rule for the CPU kernel (NormActLinear's:
bench_norm_act_linear_cpu.py).

    PYTHONPATH=. python bench/bench_norm_act_cpu.py [--dims 256,768,1024,4096] [--rows 128,2048]
        [--activations gelu,silu] [--library NAME=PATH ...] [--rounds 15] [--out DIR] [--name NAME]

Each ``--library`` adds a fused session on that libgraphopt_ort.so (default: the one
``graphopt.ort.library_path()`` finds), so kernels before and after a change are timed side by side.
Scale and bias are initializers; float32. The sessions of a case run interleaved in ``--rounds`` rounds,
each a batch of calls of about 20 ms; the median per-call time over rounds is reported with its spread
(max - min over median), and every fused session's output is checked against ONNX Runtime's first.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graphopt.fused import DOMAIN, DOMAIN_VERSION
from graphopt.ort import library_path

ONNX_ACTIVATION = {"gelu": "Gelu", "silu": None, "relu": "Relu", "tanh": "Tanh"}


def model(d: int, activation: str, fused: bool):
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "S"),
        numpy_helper.from_array((0.1 * rng.standard_normal(d)).astype(np.float32), "B"),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["rows", d]) for n in ("X", "Y")]
    if fused:
        nodes = [helper.make_node("NormAct", ["X", "S", "B"], ["Y"], domain=DOMAIN, activation=activation)]
    else:
        nodes = [helper.make_node("LayerNormalization", ["X", "S", "B"], ["L"], epsilon=1e-5)]
        if (
            activation == "silu"
        ):  # (ONNX Runtime fuses the two into its QuickGelu-like SiLU kernel where it can)
            nodes += [helper.make_node("Sigmoid", ["L"], ["G"]), helper.make_node("Mul", ["L", "G"], ["Y"])]
        else:
            nodes.append(helper.make_node(ONNX_ACTIVATION[activation], ["L"], ["Y"]))
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(DOMAIN, DOMAIN_VERSION)] if fused else [])
    return helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], inits), opset_imports=opsets)


def session(onnx_model, library: str | None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    if library:
        options.register_custom_ops_library(library)
    return ort.InferenceSession(onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def time_case(sessions: dict, x: np.ndarray, rounds: int) -> dict:
    calls = {}
    for name, s in sessions.items():  # (warm-up, and how many calls make about 20 ms)
        start = time.perf_counter()
        s.run(None, {"X": x})
        calls[name] = max(1, int(0.02 / max(time.perf_counter() - start, 1e-6)))
    samples = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, s in sessions.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                s.run(None, {"X": x})
            samples[name].append((time.perf_counter() - start) / calls[name] * 1e6)
    out = {}
    for name, values in samples.items():
        median = statistics.median(values)
        out[name] = {"us": median, "spread": (max(values) - min(values)) / median}
    return out


def common_options(parser: argparse.ArgumentParser, name: str) -> None:
    """The options every CPU kernel benchmark takes: libraries, rounds and where the record goes."""
    parser.add_argument("--library", action="append", default=[], help="NAME=PATH of a libgraphopt_ort.so")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", default=None)
    parser.add_argument("--name", default=name)


def libraries_of(args) -> dict[str, str]:
    """Name -> path of each ``--library`` (default: the one ``graphopt.ort.library_path()`` finds)."""
    return dict(item.split("=", 1) for item in args.library) or {"graphopt": str(library_path())}


def channel_affine(channels: int) -> tuple[np.ndarray, np.ndarray]:
    """A scale near 1 and a shift near 0 per channel (seed 0), float32."""
    rng = np.random.default_rng(0)
    return (1 + 0.1 * rng.standard_normal(channels)).astype(np.float32), (
        0.1 * rng.standard_normal(channels)
    ).astype(np.float32)


def run_case(sessions: dict, x: np.ndarray, rounds: int, label: str) -> tuple[dict, dict]:
    """(times, max abs errors against ONNX Runtime's session "ort") of the sessions on X; prints a line."""
    expected = sessions["ort"].run(None, {"X": x})[0]
    errors = {n: float(np.abs(s.run(None, {"X": x})[0] - expected).max()) for n, s in sessions.items()}
    times = time_case(sessions, x, rounds)
    base = times["ort"]["us"]
    line = "  ".join(f"{n} {t['us']:8.1f} µs ({t['us'] / base:.2f}x)" for n, t in times.items())
    print(f"{label}: {line}", flush=True)
    return times, errors


def write_record(args, argv, script: str, cases: list) -> None:
    """Writes ``args.name``.json to ``args.out`` (when given): the cases with the date, the machine,
    ONNX Runtime's version and the command that made them."""
    if not args.out:
        return
    record = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": platform.processor() or platform.machine(),
        "onnxruntime": ort.__version__,
        "threads": 1,
        "command": f"python {script} " + shlex.join(argv or sys.argv[1:]),
        "cases": cases,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"{args.name}.json").write_text(json.dumps(record, indent=2) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", default="256,768,1024,4096")
    p.add_argument("--rows", default="128,2048")
    p.add_argument("--activations", default="gelu")
    common_options(p, "norm_act_cpu")
    args = p.parse_args(argv)
    libraries = libraries_of(args)
    cases = []
    for act in args.activations.split(","):
        for d in map(int, args.dims.split(",")):
            sessions = {"ort": session(model(d, act, False), None)}
            sessions |= {name: session(model(d, act, True), path) for name, path in libraries.items()}
            for rows in map(int, args.rows.split(",")):
                x = (np.random.default_rng(1).standard_normal((rows, d)) * 2 + 0.5).astype(np.float32)
                times, errors = run_case(sessions, x, args.rounds, f"{act} D={d} rows={rows}")
                cases.append(
                    {"activation": act, "D": d, "rows": rows, "times": times, "max_abs_error": errors}
                )
    write_record(args, argv, "bench/bench_norm_act_cpu.py", cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
