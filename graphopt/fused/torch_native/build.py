"""Building the C++ eager kernels (``dispatch.cc`` and each op's ``torch_eager.cc``) against the
PyTorch of this process, once per PyTorch and source version.

The library uses PyTorch's C++ API, whose ABI changes between releases, so it cannot ship prebuilt
with graphopt (a py3-none wheel for every PyTorch). It is compiled on first use with the C++ compiler
PyTorch's own extensions use (``$CXX``, else ``c++``), from headers the PyTorch wheel carries: no CUDA
toolkit is needed (the kernels launch through libgraphopt_ort). The result is cached under
``$GRAPHOPT_CACHE`` (default ``${XDG_CACHE_HOME:-~/.cache}/graphopt``) by a key of the sources, the
PyTorch version and the command, and written atomically, so concurrent first uses are safe.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils import cpp_extension

HERE = Path(__file__).resolve().parent
FUSED = HERE.parent
# Headers the sources include besides PyTorch's (their text is part of the cache key).
HEADERS = (HERE / "fast_path.h", FUSED.parent / "ort" / "src" / "broadcast_rows.h")
LIBRARY_NAME = "libgraphopt_torch_native.so"


class BuildError(RuntimeError):
    """The library could not be built (no compiler, or it failed: the message says which)."""


def sources() -> list[Path]:
    return [HERE / "dispatch.cc", *sorted(FUSED.glob("*/torch_eager.cc"))]


def command(output: Path) -> list[str]:
    torch_lib = Path(torch.__file__).parent / "lib"
    includes = [f"-I{p}" for p in (*cpp_extension.include_paths(), FUSED)]
    return [
        os.environ.get("CXX", "c++"), "-O2", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", *includes,
        *map(str, sources()), "-o", str(output),
        f"-L{torch_lib}", "-lc10", "-ltorch_cpu", f"-Wl,-rpath,{torch_lib}", "-ldl",
    ]  # fmt: skip


def cache_dir() -> Path:
    root = os.environ.get("GRAPHOPT_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphopt"
    return Path(root) / "torch_native"


def key() -> str:
    digest = hashlib.sha256(torch.__version__.encode())
    for source in [*sources(), *HEADERS]:
        digest.update(source.name.encode() + source.read_bytes())
    digest.update(" ".join(command(Path("out"))).encode())
    return digest.hexdigest()[:16]


def built_library(log=None) -> Path:
    """The library for this PyTorch, built now if the cache lacks it (tens of seconds); ``log`` (a
    callable) hears one line before a build. Raises BuildError."""
    target = cache_dir() / key() / LIBRARY_NAME
    if target.exists():
        return target
    if log is not None:
        log(
            f"graphopt: building the C++ eager kernels for torch {torch.__version__} "
            f"(once; cached in {target.parent})"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        partial = Path(scratch) / LIBRARY_NAME
        try:
            done = subprocess.run(command(partial), capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BuildError(f"the C++ compiler did not run: {error}") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no output)"]
            first = next((line for line in lines if "error" in line), lines[-1])
            raise BuildError(f"compiling failed: {first} (command: {shlex.join(command(partial))})")
        os.replace(partial, target)
    return target


if __name__ == "__main__":
    print(built_library(log=lambda line: print(line, file=sys.stderr)))
