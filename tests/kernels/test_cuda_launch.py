"""The C++ driver-API launcher (graphopt/ort/cuda) on a real GPU: it is built through cuda.cmake into
a small ctypes harness (tests/kernels/cuda_harness), then checked against the float64 reference
and against the Python launcher's choice of variant. Skipped without a CUDA device."""

import ctypes
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kernel_checks import assert_matches, assert_written, f64, generator, poisoned, random_rows, random_vector

from graphopt.fused import NORM_ACT, NORM_ACT_LINEAR, Activation, Norm
from graphopt.fused.group_norm_act import GROUP_NORM_ACT, launch_rule
from graphopt.fused.norm_act.triton_kernel import norm_act_config
from graphopt.fused.norm_act_linear.triton_kernel import norm_act_linear_config

REPO = Path(__file__).resolve().parents[2]
DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
DTYPE_NAME = {0: "float32", 1: "float16", 2: "bfloat16"}

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

U64, I64, I32, F32 = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, ctypes.c_float


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found")
    build = tmp_path_factory.mktemp("cuda_harness")
    major, minor = torch.cuda.get_device_capability()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    source = REPO / "tests" / "kernels" / "cuda_harness"
    configure = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
         f"-DPython_EXECUTABLE={sys.executable}", f"-DGRAPHOPT_CUDA_ARCHS={major}{minor}"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    if configure.returncode != 0 and "cuda.h not found" in configure.stdout:
        pytest.skip("cuda.h not found (set GRAPHOPT_CUDA_INCLUDE_DIR)")
    assert configure.returncode == 0, configure.stdout + configure.stderr
    jobs = str(os.cpu_count() or 1)
    compiled = subprocess.run(
        ["cmake", "--build", str(build), "-j", jobs], env=env, capture_output=True, text=True
    )
    assert compiled.returncode == 0, compiled.stdout[-4000:] + compiled.stderr[-4000:]
    lib = ctypes.CDLL(str(next(build.glob("libgraphopt_cuda_harness.*"))))
    lib.harness_norm_act.argtypes = [U64] * 6 + [I64, I64, F32, I32, I32, I32, U64, I32]
    lib.harness_norm_act.restype = ctypes.c_char_p
    lib.harness_norm_act_linear.argtypes = [U64] * 6 + [I64, I64, I64, F32, I32, I32, I32, I32, U64, I32]
    lib.harness_norm_act_linear.restype = ctypes.c_char_p
    lib.harness_norm_act_linear_rows.argtypes = [U64] * 8 + [I64, I64, I64, ctypes.POINTER(I64), F32]
    lib.harness_norm_act_linear_rows.argtypes += [I32] * 4 + [U64]
    lib.harness_norm_act_linear_rows.restype = ctypes.c_char_p
    lib.harness_group_norm_act.argtypes = [U64] * 7 + [I64] * 4 + [F32, I32, I32, U64, I32]
    lib.harness_group_norm_act.restype = ctypes.c_char_p
    return lib


def ptr(t):
    return 0 if t is None else t.data_ptr()


def stream():
    return torch.cuda.current_stream().cuda_stream


@pytest.mark.parametrize("dtype", [0, 1, 2])
@pytest.mark.parametrize(
    "cols", [1, 16, 100, 256, 768, 1000, 1024, 1280, 1536, 4096, 5120, 8192, 8208, 50000]
)
def test_cpp_picks_the_python_variant(harness, dtype, cols):
    for base in (1 << 20, (1 << 20) + 2):  # 16-byte aligned, then not
        aligned = base % 16 == 0 and cols % 16 == 0
        # (the harness's operands are shared by all rows: both ops take their shared-operand variants
        # where aligned)
        expected = norm_act_config(64, cols, DTYPE_NAME[dtype], aligned).tier.name
        got = harness.harness_norm_act(base, 0, 0, 0, base, 0, 64, cols, 1e-5, 0, 0, dtype, 0, 1).decode()
        assert got == f"NormAct/{DTYPE_NAME[dtype]}/{expected}"
        for k in (1, 3):  # (one output: the variants with K compiled in, where the width has them)
            config = norm_act_linear_config(64, cols, DTYPE_NAME[dtype], aligned, uniform=0, out_features=k)
            args = (base, 0, 0, base, 0, base, 64, cols, k, 1e-5, 0, 0, 0, dtype, 0, 1)
            got = harness.harness_norm_act_linear(*args).decode()
            assert got == f"NormActLinear/{DTYPE_NAME[dtype]}/{config.tier.name}"


def test_errors_are_messages(harness):
    assert "bad shape" in harness.harness_norm_act(16, 0, 0, 0, 16, 0, 4, 0, 1e-5, 0, 0, 0, 0, 0).decode()
    assert (
        "no NormAct kernel"
        in harness.harness_norm_act(16, 0, 0, 0, 16, 0, 4, 16, 1e-5, 0, 0, 9, 0, 1).decode()
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("rows", "cols"), [(1000, 256), (77, 768), (33, 1000), (64, 4096), (5, 20000)])
@pytest.mark.parametrize(
    ("norm", "act", "residual"), [(Norm.LAYER, Activation.GELU, True), (Norm.RMS, Activation.TANH, False)]
)
def test_norm_act_on_the_gpu(harness, dtype, rows, cols, norm, act, residual):
    gen = generator("cpp", dtype, rows, cols, norm, act, residual)
    x = random_rows(rows, cols, dtype, gen, mean=0.5, std=2.0)
    r = random_rows(rows, cols, dtype, gen) if residual else None
    w, b = random_vector(cols, dtype, gen, mean=1.0), random_vector(cols, dtype, gen)
    y, y_storage = poisoned((rows, cols), dtype)
    s, s_storage = poisoned((rows, cols), dtype) if residual else (None, None)
    args = (ptr(x), ptr(r), ptr(w), ptr(b), ptr(y), ptr(s), rows, cols, 1e-5, int(norm), int(act),
            DTYPE_CODE[dtype], stream(), 0)  # fmt: skip
    assert harness.harness_norm_act(*args) == b""
    torch.cuda.synchronize()
    ref, ref_sum = NORM_ACT.reference(f64(x), f64(w), f64(b), f64(r), norm=norm.attr, activation=act.attr,
                                      epsilon=1e-5, axis=-1)  # fmt: skip
    what = f"C++ NormAct {rows}x{cols} {dtype}"
    assert_written(y_storage, rows * cols, what)
    assert_matches(y, ref, dtype, what)
    if residual:
        assert_written(s_storage, rows * cols, what + " ResidualSum")
        assert_matches(s, ref_sum, dtype, what + " ResidualSum")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("rows", "cols", "k"), [(16384, 256, 1), (100, 1000, 4), (7, 9000, 19)])
def test_norm_act_linear_on_the_gpu(harness, dtype, rows, cols, k):
    gen = generator("cpp-linear", dtype, rows, cols, k)
    x = random_rows(rows, cols, dtype, gen)
    weight = random_rows(k, cols, dtype, gen, std=cols**-0.5).contiguous()
    lb = random_vector(k, dtype, gen)
    y, y_storage = poisoned((rows, k), dtype)
    args = (ptr(x), 0, 0, ptr(weight), ptr(lb), ptr(y), rows, cols, k, 0.0, int(Norm.LAYER),
            int(Activation.TANH), int(Activation.RELU), DTYPE_CODE[dtype], stream(), 0)  # fmt: skip
    assert harness.harness_norm_act_linear(*args) == b""
    torch.cuda.synchronize()
    ref = NORM_ACT_LINEAR.reference(f64(x), None, None, f64(weight), f64(lb), norm="layer", activation="tanh",
                                    epsilon=0.0, out_activation="relu")  # fmt: skip
    assert_written(y_storage, rows * k, "C++ NormActLinear")
    assert_matches(y, ref, dtype, f"C++ NormActLinear {rows}x{cols} K={k} {dtype}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    ("x", "per_slice", "residual"),
    [
        ((128, 1024, 256), True, None),  # the per-feature model: per-slice norm and Linear(D, K)
        ((6, 5, 96), True, (5, 96)),  # blocks straddling features, a broadcast residual
        ((4096, 1024), False, (4096, 1024)),  # residual → norm → act → Linear(D, K), the sum written
        ((3, 2, 9000), True, (3, 2, 9000)),  # looped
    ],
)
@pytest.mark.parametrize("k", [1, 4])  # (K = 1: the variants with K compiled in, at 256 and 1024)
def test_norm_act_linear_rows_on_the_gpu(harness, dtype, x, per_slice, residual, k):
    from graphopt.fused.broadcast_rows import row_broadcast
    from graphopt.fused.norm_act_linear.spec import weight_rows

    gen = generator("cpp-linear-rows", dtype, x, per_slice, residual, k)
    rows, d = math.prod(x[:-1]), x[-1]
    n = x[0] if per_slice else 1
    param, weight, lb = ((n, 1, d), (n, k, d), (n, 1, k)) if per_slice else ((d,), (k, d), (k,))
    xs = random_rows(rows, d, dtype, gen).view(x)
    w, b = random_vector(math.prod(param), dtype, gen, mean=1.0), random_vector(math.prod(param), dtype, gen)
    lw = random_rows(math.prod(weight[:-1]), d, dtype, gen, std=d**-0.5).contiguous()
    lbs = random_vector(math.prod(lb), dtype, gen)
    r = None if residual is None else random_rows(math.prod(residual[:-1]), d, dtype, gen)
    y, y_storage = poisoned((rows, k), dtype)
    s, s_storage = poisoned((rows, d), dtype) if residual else (None, None)
    y_shape = (*x[:-1], k)
    residual_rows = row_broadcast(residual, x, -1) if residual else (1, 0)  # (groups 0: X's rows)
    broadcasts = [*row_broadcast(param, x, -1), *row_broadcast(param, x, -1), *weight_rows(weight, x),
                  *row_broadcast(lb, y_shape, -1), *residual_rows]  # fmt: skip
    args = (ptr(xs), ptr(r), ptr(w), ptr(b), ptr(lw), ptr(lbs), ptr(y), ptr(s), rows, d, k,
            (I64 * 10)(*broadcasts), 1e-5, int(Norm.LAYER), int(Activation.GELU), int(Activation.TANH),
            DTYPE_CODE[dtype], stream())  # fmt: skip
    assert harness.harness_norm_act_linear_rows(*args) == b""
    torch.cuda.synchronize()
    total = xs if r is None else (xs.float() + r.view(residual).float()).to(dtype)
    ref = NORM_ACT_LINEAR.reference(
        f64(total), f64(w.view(param)), f64(b.view(param)), f64(lw.view(weight)), f64(lbs.view(lb)),
        norm="layer", activation="gelu", epsilon=1e-5, out_activation="tanh",
    )  # fmt: skip
    what = f"C++ NormActLinear {list(x)} per_slice={per_slice} residual={residual} {dtype}"
    assert_written(y_storage, rows * k, what)
    assert_matches(y, ref.reshape(rows, k), dtype, what)
    if residual:
        assert_written(s_storage, rows * d, what + " ResidualSum")
        assert_matches(s, f64(total).reshape(rows, d), dtype, what + " ResidualSum")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    ("shape", "groups", "split"),
    [
        ((2, 32, 16, 16), 4, False),
        ((2, 320, 64, 64), 32, True),
        ((1, 12, 97, 89), 4, True),
        ((3, 8, 5), 4, False),
    ],
)  # (1, 12, 97, 89): runs of 25899, no multiple of 16: the unaligned split variants
@pytest.mark.parametrize("outputs", ["y", "y+sum", "y, no sum"])
def test_group_norm_act_on_the_gpu(harness, dtype, shape, groups, split, outputs):
    gen = generator("cpp-group", dtype, shape, outputs)
    n, c, spatial = shape[0], shape[1], int(torch.tensor(shape[2:]).prod())
    x = random_rows(n, c * spatial, dtype, gen, mean=3.0).view(shape)
    r = random_rows(n, c * spatial, dtype, gen).view(shape) if outputs != "y" else None
    w, b = random_vector(c, dtype, gen, mean=1.0), random_vector(c, dtype, gen)
    y, y_storage = poisoned(shape, dtype)
    s, s_storage = poisoned(shape, dtype) if outputs == "y+sum" else (None, None)
    args = [ptr(x), ptr(r), ptr(w), ptr(b), ptr(y), ptr(s), 0, n, c, spatial, groups, 1e-5,
            int(Activation.SILU), DTYPE_CODE[dtype], stream()]  # fmt: skip
    scratch_bytes = int(harness.harness_group_norm_act(*args, 2))
    assert (scratch_bytes > 0) == split
    partials = torch.empty(max(scratch_bytes // 4, 1), device="cuda")
    args[6] = ptr(partials)
    variant = harness.harness_group_norm_act(*args, 1).decode()
    assert (" chunk " in variant) == split, variant
    assert harness.harness_group_norm_act(*args, 0) == b""
    torch.cuda.synchronize()
    stored = x if r is None else (x.float() + r.float()).to(dtype)
    ref, _ = GROUP_NORM_ACT.reference(
        f64(stored), f64(w), f64(b), groups=groups, activation="silu", epsilon=1e-5
    )
    what = f"C++ GroupNormAct {list(shape)}/{groups} {dtype} {outputs} [{variant}]"
    assert_written(y_storage, x.numel(), what)
    assert_matches(y, ref, dtype, what)
    if s is not None:
        assert_written(s_storage, x.numel(), what + " ResidualSum")
        assert torch.equal(s, stored), what + " ResidualSum"
    rows, group_size = n * groups, c // groups * spatial
    assert (
        launch_rule.split_launch(rows, group_size, spatial, DTYPE_NAME[DTYPE_CODE[dtype]], False) is not None
    ) == split
