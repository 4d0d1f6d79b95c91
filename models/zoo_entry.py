"""`ZooEntry`: one test model, built on demand and cached for the rest of the process."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

Model = onnx.ModelProto | torch.export.ExportedProgram
# ONNX entries take a feed {graph input name: array}; torch.export entries take positional tensors.
Inputs = dict[str, np.ndarray] | tuple[torch.Tensor, ...]

_built: dict[str, Model] = {}


@dataclass(frozen=True)
class ZooEntry:
    """A named test model.

    `make` builds the model (slow: an export); `build()` calls it once per process and hands out copies,
    so a test that edits its model cannot disturb another. `make_inputs` gives example inputs;
    `make_expected`, when present, gives the outputs of the eager module the model came from
    (a list of arrays for ONNX entries, of tensors for torch.export entries).
    """

    name: str
    make: Callable[[], Model] = field(repr=False)
    make_inputs: Callable[[], Inputs] = field(repr=False)
    tags: frozenset[str]
    make_expected: Callable[[], list[Any]] | None = field(default=None, repr=False)
    # Writes the model into a directory and returns the file; the default is the format's plain save.
    saver: Callable[[Model, Path], Path] | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return "torch_export" if "torch_export" in self.tags else "onnx"

    def build(self) -> Model:
        if self.name not in _built:
            _built[self.name] = self.make()
        with warnings.catch_warnings():
            # Copying an ExportedProgram trips a deprecation inside torch's pytree code; it is not ours.
            warnings.simplefilter("ignore", FutureWarning)
            return copy.deepcopy(_built[self.name])

    def inputs(self) -> Inputs:
        return self.make_inputs()

    def expected(self) -> list[Any] | None:
        return None if self.make_expected is None else self.make_expected()

    def save(self, directory: Path) -> Path:
        """Write the model into `directory` (`<name>.onnx` or `<name>.pt2`) and return its path."""
        directory = Path(directory)
        model = self.build()
        if self.saver is not None:
            return self.saver(model, directory)
        if isinstance(model, onnx.ModelProto):
            path = directory / f"{self.name}.onnx"
            onnx.save_model(model, path)
        else:
            path = directory / f"{self.name}.pt2"
            torch.export.save(model, path)
        return path
