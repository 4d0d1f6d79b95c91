"""ONNX models in a stock ONNX Runtime, without graphopt's op library: the original against graphopt's
output, whose fused nodes then run as their fallback functions (standard ops that ONNX Runtime inlines).
That is what a user who has not installed the library runs, and never-slower holds there too.

    python bench/bench_without_library.py ORIGINAL.onnx OPTIMIZED.onnx [MORE.onnx ...] \\
        [--device cpu|cuda] [--threads 1] [--input-shape NAME:8x3x64x64] [--rounds 15] [--block 10] \\
        [--library] [--out FILE.json]

Every file is fed the first file's inputs (random, seed 0; ``--input-shape`` sizes symbolic dims) and
timed start to finish, one synchronized call, in interleaved rounds with a noise figure each
(graphopt/benchmark/rounds.py); each file's time is also given over the first's. The outputs are
compared with the first file's, so a file that computes something else is reported, not timed as equal.
With ``--library``, each file after the first is also timed with graphopt's library registered (a row
``FILE + library``: its fused nodes then run graphopt's kernels), in the same rounds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graphopt.benchmark.inputs import model_feeds  # noqa: E402
from graphopt.benchmark.rounds import interleaved_us  # noqa: E402


def _cpu_call(path: Path, feeds: dict[str, np.ndarray], threads: int, library: bool = False):
    import onnxruntime as ort

    from graphopt.ort import library_path

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if library:
        options.register_custom_ops_library(str(library_path()))
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds), lambda: session.run(None, feeds)[0]


def _cuda_call(path: Path, feeds: dict[str, np.ndarray], library: bool = False):
    import torch  # (before onnxruntime: its CUDA libraries must be loaded first)

    from graphopt.benchmark.ort_cuda import ort_cuda_callable

    tensors = {name: torch.from_numpy(array).cuda() for name, array in feeds.items()}
    call = ort_cuda_callable(onnx.load(str(path)), tensors, cuda_graph=False, with_library=library)

    def first_output():
        output = call()
        return (output[0] if isinstance(output, list) else output).float().cpu().numpy()

    return call, first_output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+", help="the original first, then the files to compare")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime's intra-op threads (CPU)")
    parser.add_argument("--input-shape", action="append", default=[], help="NAME:8x3x64x64 (repeatable)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--library", action="store_true", help="also time the files after the first with it")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    shapes = {}
    for text in args.input_shape:
        name, _, dims = text.rpartition(":")
        shapes[name] = [int(d) for d in dims.split("x")]
    feeds = model_feeds(args.files[0], shapes)
    runs = [(path, False) for path in args.files] + [(path, True) for path in args.files[1:] if args.library]
    names = [path.name + (" + library" if library else "") for path, library in runs]
    synchronize = None
    if args.device == "cuda":
        import torch

        calls = [_cuda_call(path, feeds, library) for path, library in runs]
        synchronize = torch.cuda.synchronize
    else:
        calls = [_cpu_call(path, feeds, args.threads, library) for path, library in runs]
    reference = calls[0][1]().astype(np.float64)
    errors = [float(np.nanmax(np.abs(call[1]().astype(np.float64) - reference))) for call in calls]
    timings = interleaved_us([call[0] for call in calls], rounds=args.rounds, block=args.block,
                             synchronize=synchronize)  # fmt: skip
    first = timings[0].median_us
    rows = [
        {"file": name, "us": t.median_us, "noise": t.noise, "over_first": t.median_us / first,
         "max_abs_error_vs_first": error}
        for name, t, error in zip(names, timings, errors, strict=True)
    ]  # fmt: skip
    print(f"| file | µs | noise ± | ÷ {args.files[0].name} | max abs error vs it |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['file']} | {row['us']:,.1f} | {row['noise']:.1%} | {row['over_first']:.2f} | "
              f"{row['max_abs_error_vs_first']:.1e} |")  # fmt: skip
    if args.out:
        import onnxruntime as ort

        args.out.write_text(json.dumps({
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "device": args.device, "threads": args.threads, "onnxruntime": ort.__version__,
            "command": " ".join(["python3", "bench/bench_without_library.py", *sys.argv[1:]]), "rows": rows,
        }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
