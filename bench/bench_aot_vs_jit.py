"""The NormAct kernel four ways on one GPU: Triton's JIT launch (as PyTorch runs it), the same JIT
kernel with its flag and operand-row arguments unspecialized (the ahead-of-time variant's code),
with no integer argument specialized, and the ahead-of-time cubin through the C++ driver-API
launcher that ONNX Runtime uses.

Triton's JIT compiles a kernel per set of "equal to 1" and "divisible by 16" integer arguments, so a
launch with a scale and a bias present (has_scale = has_bias = 1) gets code with those branches
folded away; the ahead-of-time variants take them at run time. This measures what that costs.

    python bench/bench_aot_vs_jit.py [--cases float32:5120 bfloat16:768 ...] [--out DIR] [--name NAME]

The ahead-of-time rows launch the variants of the tree the harness is built from, through the
launcher's own choice of variant (named in each row), so two trees compare side by side when the
script runs from each in turn on one machine.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from graphopt.benchmark.timing import copy_bandwidth_bytes_per_s, gpu_us
from graphopt.fused import Activation, Norm
from graphopt.fused.norm_act import triton_kernel as norm_act_module
from graphopt.fused.norm_act.triton_kernel import launch_norm_act

REPO = Path(__file__).resolve().parent.parent
ROWS = 16384
CASES = ["float32:1024", "float32:8192", "float16:256", "float16:1024", "float16:8192", "bfloat16:256",
         "bfloat16:1024"]  # fmt: skip
DTYPES = {"float32": (torch.float32, 0), "float16": (torch.float16, 1), "bfloat16": (torch.bfloat16, 2)}
U64, I64, I32, F32 = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, ctypes.c_float


def build_harness() -> ctypes.CDLL:
    build = Path(tempfile.mkdtemp(prefix="harness_"))
    major, minor = torch.cuda.get_device_capability()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run(
        ["cmake", "-S", str(REPO / "tests" / "kernels" / "cuda_harness"), "-B", str(build),
         "-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}",
         f"-DGRAPHOPT_CUDA_ARCHS={major}{minor}"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count())], env=env, check=True,
                   capture_output=True)  # fmt: skip
    lib = ctypes.CDLL(str(next(build.glob("libgraphopt_cuda_harness.*"))))
    lib.harness_norm_act.argtypes = [U64] * 6 + [I64, I64, F32, I32, I32, I32, U64, I32]
    lib.harness_norm_act.restype = ctypes.c_char_p
    return lib


FLAGS = ["norm", "activation", "has_scale", "has_bias", "has_residual", "w_inner", "w_groups", "b_inner",
         "b_groups", "r_inner", "r_groups"]  # fmt: skip


def flags_unspecialized_kernel():
    """The same kernel source with only its flag and operand-row arguments left unspecialized (row
    length and strides still specialized on divisibility by 16): the code the ahead-of-time variant
    of the same tier runs."""
    return triton.jit(norm_act_module.norm_act_kernel.fn, do_not_specialize=FLAGS)


def unspecialized_kernel():
    """The same kernel source, compiled without folding integer arguments equal to 1."""
    names = ["rows", "cols", "stride_x", "stride_r", "norm", "activation", "has_scale", "has_bias",
             "has_residual", "w_inner", "w_groups", "b_inner", "b_groups", "r_inner", "r_groups"]  # fmt: skip
    return triton.jit(norm_act_module.norm_act_kernel.fn, do_not_specialize=names)


def measure(harness, unspecialized, flags, bandwidth: float, dtype_name: str, cols: int) -> dict:
    dtype, code = DTYPES[dtype_name]
    plain = norm_act_module.norm_act_kernel
    stream = torch.cuda.current_stream().cuda_stream
    # Enough input copies that each call reads from HBM, not from L2 (50 MB on an H100).
    copies = max(1, (256 << 20) // (ROWS * cols * dtype.itemsize))
    xs = [torch.randn(ROWS, cols, device="cuda").to(dtype) for _ in range(copies)]
    w = torch.randn(cols, device="cuda").to(dtype)
    b = torch.randn(cols, device="cuda").to(dtype)
    y = torch.empty(ROWS, cols, device="cuda", dtype=dtype)
    turn = [0]

    def next_x():
        turn[0] = (turn[0] + 1) % copies
        return xs[turn[0]]

    def jit(kernel):
        def call():
            norm_act_module.norm_act_kernel = kernel
            try:
                launch_norm_act(next_x(), w, b, None, y, None, norm=int(Norm.LAYER),
                                activation=int(Activation.GELU), eps=1e-5)  # fmt: skip
            finally:
                norm_act_module.norm_act_kernel = plain

        return call

    def aot():
        x = next_x()
        error = harness.harness_norm_act(x.data_ptr(), 0, w.data_ptr(), b.data_ptr(), y.data_ptr(), 0,
                                         ROWS, cols, 1e-5, int(Norm.LAYER), int(Activation.GELU),
                                         code, stream, 0)  # fmt: skip
        if error:
            raise RuntimeError(error.decode())

    roofline = (2 * ROWS * cols + 2 * cols) * dtype.itemsize / bandwidth * 1e6
    variant = harness.harness_norm_act(xs[0].data_ptr(), 0, w.data_ptr(), b.data_ptr(), y.data_ptr(), 0,
                                       ROWS, cols, 1e-5, int(Norm.LAYER), int(Activation.GELU), code, stream,
                                       1).decode()  # fmt: skip
    row = {"dtype": dtype_name, "cols": cols, "roofline_us": round(roofline, 2), "aot_variant": variant}
    calls = (("jit", jit(plain)), ("jit_flags_unspecialized", jit(flags)),
             ("jit_unspecialized", jit(unspecialized)), ("aot", aot))  # fmt: skip
    for label, call in calls:
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        us = gpu_us(call, iters=30)
        row[f"{label}_us"] = round(us, 2)
        row[f"{label}_x_roofline"] = round(us / roofline, 3)
    return row


def record_of(script: str, **fields) -> dict:
    """A results record: the device, Triton, date and command of this run of ``script``, then ``fields``."""
    return {"device": torch.cuda.get_device_name(), "triton": triton.__version__,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": f"python bench/{script} " + " ".join(sys.argv[1:]), **fields}  # fmt: skip


def save_record(out: Path | None, name: str, record: dict) -> None:
    """``record`` as OUT/NAME.json (nothing without ``out``)."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=CASES, help="DTYPE:COLS, e.g. bfloat16:768")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--name", default="aot_vs_jit", help="the results file's name, without .json")
    args = parser.parse_args()
    harness = build_harness()
    bandwidth = copy_bandwidth_bytes_per_s()
    unspecialized, flags = unspecialized_kernel(), flags_unspecialized_kernel()
    rows_out = []
    for case in args.cases:
        dtype_name, cols = case.split(":")
        rows_out.append(measure(harness, unspecialized, flags, bandwidth, dtype_name, int(cols)))
        print(rows_out[-1], flush=True)
    record = record_of("bench_aot_vs_jit.py", rows=ROWS, activation="gelu", norm="layer (affine)",
                       results=rows_out)  # fmt: skip
    save_record(args.out, args.name, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
