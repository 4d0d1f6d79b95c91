"""The C++ launcher's choice for GroupNormAct (cuda_launch.cc: whole kernel or split, the variants, the
chunks, the scratch bytes), compiled on this machine with a kernel table of the real variants and
stand-in images, against the Python launcher's rule (launch_rule.py). Needs g++ and CUDA's cuda.h
(for the driver API's types), not a GPU: nothing is launched."""

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from graphopt.fused import cpp_codegen
from graphopt.fused.group_norm_act import launch_rule
from graphopt.kernels import aot, aot_codegen
from graphopt.kernels.aot_specs import Variant, all_variants

REPO = Path(__file__).resolve().parents[3]
DTYPES = ("float32", "float16", "bfloat16")
U64, I64, I32, F32 = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, ctypes.c_float


def _cuda_include() -> Path | None:
    roots = [os.environ.get("GRAPHOPT_CUDA_INCLUDE_DIR"), os.environ.get("CUDA_HOME")]
    roots = [Path(r) for r in roots if r] + sorted(Path("/usr/local").glob("cuda*"), reverse=True)
    for root in roots:
        for candidate in (root, root / "include"):
            if (candidate / "cuda.h").exists():
                return candidate
    return None


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    include = _cuda_include()
    if include is None or shutil.which("g++") is None:
        pytest.skip("needs g++ and cuda.h")
    build = tmp_path_factory.mktemp("group_norm_rule")
    cpp_codegen.main(["--out", str(build)])
    stand_in = [aot.Image(90, b"\0", 0), aot.Image(0, b"\0", 0)]
    compiled = [aot.Compiled(i, v.key, "k", v.tier.num_warps, 0, (0, 1), (0, 1), stand_in)
                for i, v in enumerate(all_variants())]  # fmt: skip
    (build / "kernel_images.cc").write_text(
        aot_codegen.render(list(zip(all_variants(), compiled, strict=True)), "0")
    )
    cuda = REPO / "graphopt" / "ort" / "cuda"
    sources = [
        cuda / "launch.cc",
        cuda / "driver_api.cc",
        cuda / "kernel_loader.cc",
        build / "kernel_images.cc",
    ]
    sources += sorted((REPO / "graphopt" / "fused").glob("*/cuda_launch.cc"))
    sources.append(REPO / "tests" / "kernels" / "cuda_harness" / "harness.cc")
    includes = [cuda, build, REPO / "graphopt" / "fused", REPO / "graphopt" / "ort" / "src", include]
    library = build / "libharness.so"
    command = ["g++", "-std=c++17", "-O0", "-shared", "-fPIC", *(f"-I{i}" for i in includes)]
    done = subprocess.run(
        [*command, *map(str, sources), "-o", str(library), "-ldl"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lib = ctypes.CDLL(str(library))
    lib.harness_group_norm_act.argtypes = [U64] * 7 + [I64] * 4 + [F32, I32, I32, U64, I32]
    lib.harness_group_norm_act.restype = ctypes.c_char_p
    return lib


def expected(rows, group_size, spatial, dtype, aligned):
    split = launch_rule.split_launch(rows, group_size, spatial, dtype, aligned)
    if split is None:
        return Variant("GroupNormAct", dtype, launch_rule.whole_tier(group_size, dtype, aligned)).key, "0"
    apply = "apply_long_channels" if launch_rule.long_channels(spatial, split.tier) else "apply"
    stats, apply = (Variant("GroupNormAct", dtype, split.tier, part).key for part in ("stats", apply))
    return f"{stats} {apply} chunk {split.chunk} x {split.chunks}", str(4 * split.partial_floats(rows))


@pytest.mark.parametrize("dtype", range(3))
@pytest.mark.parametrize(
    ("batch", "channels", "spatial", "groups"),
    [(2, 320, 4096, 32), (2, 1280, 256, 32), (1, 256, 65536, 32), (8, 128, 1024, 32), (8, 320, 4096, 32),
     (2, 64, 256, 8), (1, 3, 8633, 1), (255, 1, 8192, 1), (256, 1, 8192, 1), (1, 4, 1 << 22, 1),
     (3, 8, 5, 4), (2, 8, 4095, 2), (8, 320, 4095, 32), (8, 640, 4096, 32), (16, 128, 4096, 32),
     (8, 320, 1024, 32)],
)  # fmt: skip
# (Split launches with channels of a whole block or more take the apply kernel's long_channels variant,
# (2, 8, 4095, 2) with one element less does not. At 256 rows, runs of 40960 split only on such channels:
# (8, 320, 4096, 32) and (8, 640, 4096, 32), not (8, 320, 4095, 32); fp32 runs of 16384 stay whole,
# (16, 128, 4096, 32).)
def test_cpp_chooses_what_python_chooses(harness, batch, channels, spatial, groups, dtype):
    rows, group_size = batch * groups, channels // groups * spatial
    name = DTYPES[dtype]
    for base in (1 << 20, (1 << 20) + 2):  # 16-byte aligned, then not
        pointers = (base, base, 0, 0, base, base, base)  # x, residual, scale, bias, y, residual_sum, partials
        args = (*pointers, batch, channels, spatial, groups, 1e-5, 0, dtype, 0)
        variant, scratch = (
            harness.harness_group_norm_act(*args, 1).decode(),
            harness.harness_group_norm_act(*args, 2),
        )
        aligned = base % 16 == 0 and group_size % 16 == 0
        assert (variant, scratch.decode()) == expected(rows, group_size, spatial, name, aligned)


def test_a_split_launch_without_its_scratch_is_refused_before_anything_runs(harness):
    split = (16, 0, 0, 0, 16, 0, 0, 2, 320, 4096, 32, 1e-5, 0, 0, 0)
    assert harness.harness_group_norm_act(*split, 0).decode().endswith("needs GroupNormActScratchBytes() of "
                                                                      "scratch memory")  # fmt: skip
    assert harness.harness_group_norm_act(*split[:6], 16, *split[7:], 2).decode() == str(4 * 3 * 64 * 10)
