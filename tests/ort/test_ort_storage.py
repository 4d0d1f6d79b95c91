"""The library's float16/bfloat16 conversions agree bit for bit with numpy's and ml_dtypes'."""

import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from graphopt.fused import cpp_codegen

SOURCE = Path(__file__).with_name("storage_check.cc")
INCLUDE = Path(__file__).resolve().parents[2] / "graphopt" / "ort" / "src"


@pytest.fixture(scope="module")
def storage_check(tmp_path_factory) -> Path:
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler on PATH")
    work = tmp_path_factory.mktemp("storage")
    binary = work / "storage_check"
    cpp_codegen.main(["--out", str(work)])  # the generated enums the library's headers include
    # -O2 as in the library's build: the conversions must survive the optimizer too.
    subprocess.run(
        [compiler, "-std=c++17", "-O2", f"-I{INCLUDE}", f"-I{work}", str(SOURCE), "-o", str(binary)],
        check=True,
    )
    return binary


def probe_values() -> np.ndarray:
    """Every float16 value, the midpoints between neighbours (ties) and one float32 ulp either side,
    both signs; the same around bfloat16 values; overflow, underflow and special values; random bits."""
    halves = np.arange(0x7C01, dtype=np.uint16).view(np.float16).astype(np.float32)
    bf16 = np.arange(0, 0x7F81, 7, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    points = []
    for grid in (halves, bf16):
        mid = ((grid[:-1].astype(np.float64) + grid[1:]) / 2).astype(np.float32)
        points += [grid, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(0))]
    special = np.array(
        [0.0, np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e10, 1e-10, 2.0**-25, 2.0**-24], np.float32
    )
    random_bits = (
        np.random.default_rng(0)
        .integers(0, 2**32, 1 << 20, dtype=np.uint64)
        .astype(np.uint32)
        .view(np.float32)
    )
    values = np.concatenate([*points, special, random_bits])
    return np.concatenate([values, -values])


def test_conversions_match_numpy(storage_check, tmp_path):
    values = probe_values()
    (tmp_path / "in").write_bytes(values.tobytes())
    subprocess.run([str(storage_check), str(tmp_path / "in"), str(tmp_path / "out")], check=True)
    out = (tmp_path / "out").read_bytes()
    widened = np.frombuffer(out, np.float32, count=2 * 65536)
    narrowed = np.frombuffer(out, np.uint16, offset=widened.nbytes)
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)

    np.testing.assert_array_equal(widened[:65536], patterns.view(np.float16).astype(np.float32))
    np.testing.assert_array_equal(widened[65536:], patterns.view(ml_dtypes.bfloat16).astype(np.float32))

    n = values.size
    with np.errstate(over="ignore", invalid="ignore"):
        expected_half = values.astype(np.float16)
        expected_bf16 = values.astype(ml_dtypes.bfloat16)
    for got_bits, expected in ((narrowed[:n], expected_half), (narrowed[n:], expected_bf16)):
        got = got_bits.view(expected.dtype)
        nan = np.isnan(expected.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        np.testing.assert_array_equal(got_bits[~nan], expected.view(np.uint16)[~nan])
