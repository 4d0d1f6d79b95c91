"""Real inputs for the numeric check: a ``.npz`` file with one array per graph input, by input name.

The arrays must fit the graph: every input present (except ONNX inputs that have a default), no
extra names, the input's element type, its rank, its static dims, and one size per symbolic dim.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import BadInput
from ..ir import DType, Graph

EXPECTED = "expected a .npz file written by numpy.savez with one array per graph input"


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays in ``path``; BadInput (one line) if it is not a readable .npz of plain arrays."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"--inputs {path}: no such file; {EXPECTED}")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise BadInput(f"--inputs {path} holds a single array, not named arrays; {EXPECTED}")
        with loaded as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise BadInput(f"--inputs {path} cannot be read ({detail}); {EXPECTED}") from None


def feeds_from_arrays(graph: Graph, arrays: Mapping[str, np.ndarray], where: str = "--inputs") -> dict:
    """The arrays as feeds for ``graph``, after checking names, dtypes and shapes against its inputs."""
    inputs = {value.name: value for value in graph.inputs}
    extra = sorted(set(arrays) - set(inputs))
    if extra:
        raise BadInput(
            f"{where}: {', '.join(map(repr, extra))} is not an input of the model; "
            f"its inputs are {', '.join(map(repr, inputs))}"
        )
    missing = [name for name, v in inputs.items() if name not in arrays and "onnx_initializer" not in v.meta]
    if missing:
        raise BadInput(f"{where}: no array for input(s) {', '.join(map(repr, missing))}")
    symbols: dict[str, tuple[int, str]] = {}
    feeds = {}
    for name, array in arrays.items():
        array = np.asarray(array)
        value = inputs[name]
        dtype = DType.from_numpy(array.dtype)
        if value.dtype is not None and dtype is not value.dtype:
            raise BadInput(f"{where}: {name!r} is {array.dtype}; the model's input is {value.dtype}")
        if value.shape is not None:
            _check_shape(name, array.shape, value.shape, symbols, where)
        feeds[name] = array
    return feeds


def _check_shape(name: str, got: tuple[int, ...], want, symbols: dict[str, tuple[int, str]], where: str):
    expected = "x".join("?" if d is None else str(d) for d in want) or "scalar"
    if len(got) != len(want):
        raise BadInput(
            f"{where}: {name!r} has shape {list(got)}; the model's input has rank {len(want)} ({expected})"
        )
    for axis, (size, dim) in enumerate(zip(got, want, strict=True)):
        if isinstance(dim, int) and size != dim:
            raise BadInput(f"{where}: {name!r} has shape {list(got)}; the model's input is {expected}")
        if isinstance(dim, str):
            seen = symbols.setdefault(dim, (size, f"{name!r} axis {axis}"))
            if seen[0] != size:
                raise BadInput(
                    f"{where}: dim {dim!r} is {size} in {name!r} axis {axis} but {seen[0]} in {seen[1]}"
                )
