"""Optional dependencies, imported where a feature needs them.

graphopt installs without an ONNX Runtime (so that installing it never replaces a user's
onnxruntime-gpu with the CPU package), without Triton (CUDA builds of PyTorch bring it; nothing on a
CPU needs it) and without pydot (only ``show`` with Graphviz draws through it). Where one is needed
and missing, ``require`` raises an error that says which package to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import BadInput

INSTALL_HINTS = {
    "onnxruntime": (
        "pip install 'graphopt[cpu]' (the onnxruntime package), or 'graphopt[gpu]' on a CUDA machine "
        "(onnxruntime-gpu)"
    ),
    "triton": "pip install triton (PyTorch's CUDA wheels install it)",
    "pydot": "pip install 'graphopt[show]'",
}


class MissingDependency(BadInput, ImportError):
    """An optional package a feature needs is not installed. The message says what to install.

    A BadInput, so the CLI prints it as one line and exits with code 2, having written nothing.
    """


def require(module: str, needed_for: str) -> ModuleType:
    """Imports ``module``, or raises MissingDependency naming ``needed_for`` and what to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != module.split(".")[0]:
            raise  # the package is there but something it imports is not: not ours to explain
        raise MissingDependency(
            f"{needed_for} needs {module}, which is not installed; {INSTALL_HINTS[module]}"
        ) from None
