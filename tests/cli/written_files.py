"""Models and places for the tests of what graphopt writes: a model whose weights live in an external
file, and a private tmpfs (read-only, or too small for the output) to run the command line in."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

LISTING = "--- files left:"


def external_weights_model(folder: Path, data_name: str = "weights.bin", name: str = "model.onnx") -> Path:
    """``x @ W → tanh`` with a 64 KiB W kept in ``folder/data_name``."""
    weight = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])],
        "external",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 128])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 128])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = folder / name
    onnx.save(model, path, save_as_external_data=True, location=data_name, size_threshold=0)
    return path


@functools.cache
def private_mounts_work() -> bool:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True
    )
    return probe.returncode == 0


def graphopt_in_tmpfs(folder: Path, options: str, *args) -> subprocess.CompletedProcess:
    """Runs ``python -m graphopt.cli ARGS`` with a fresh tmpfs mounted (``options``) on ``folder``,
    visible to that process only; stdout ends with the files the tmpfs holds afterwards."""
    script = f'mount -t tmpfs -o {options} tmpfs "$1" && shift && "$@"; rc=$?; '
    script += f'echo "{LISTING}"; ls -A "$0"; exit $rc'
    command = ["unshare", "-m", "sh", "-c", script, str(folder), str(folder)]
    command += [sys.executable, "-m", "graphopt.cli", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def files_left(result: subprocess.CompletedProcess) -> list[str]:
    return result.stdout.split(LISTING, 1)[1].split()
