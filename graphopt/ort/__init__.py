"""The ONNX Runtime custom-op library of the graphopt fused ops, and sessions that use it.

``library_path()`` finds ``libgraphopt_ort.so`` (built from this directory by the package's CMake
build); ``create_session()`` makes an ``onnxruntime.InferenceSession`` with the library registered,
so nodes in the ``graphopt`` domain run on its CPU (and, where built, CUDA) kernels.

Importing this module is cheap: onnxruntime and onnx are imported only when a session is made,
and the library only has to exist when it is asked for.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx
    import onnxruntime

__all__ = ["LIBRARY_ENV", "LIBRARY_NAME", "OrtLibraryNotFoundError", "create_session", "library_path"]

LIBRARY_NAME = "libgraphopt_ort.so"
LIBRARY_ENV = "GRAPHOPT_ORT_LIBRARY"

_BUILD_HINT = (
    "build it with `pip install --no-build-isolation -e .` from the repository root (it needs ONNX Runtime "
    "headers: see graphopt/ort/CMakeLists.txt), or point the environment variable "
    f"{LIBRARY_ENV} at a built {LIBRARY_NAME}"
)


class OrtLibraryNotFoundError(FileNotFoundError):
    """The custom-op library was not built, or not where it was said to be."""


def _candidates() -> list[Path]:
    # Beside this file for a regular install. For an editable install scikit-build-core puts
    # the CMake-installed library under site-packages/graphopt/ort/ while this file stays in the
    # source tree, so every sys.path entry is searched as well.
    here = Path(__file__).resolve().parent
    found = [here / LIBRARY_NAME]
    for entry in sys.path:
        if entry:
            found.append(Path(entry) / "graphopt" / "ort" / LIBRARY_NAME)
    return found


def library_path() -> str:
    """The path of ``libgraphopt_ort.so``, for ``SessionOptions.register_custom_ops_library``.

    ``$GRAPHOPT_ORT_LIBRARY``, when set, is used as given (and must exist).
    """
    override = os.environ.get(LIBRARY_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise OrtLibraryNotFoundError(f"{LIBRARY_ENV}={override!r} does not name a file")
        return str(path.resolve())
    for path in _candidates():
        if path.is_file():
            return str(path)
    raise OrtLibraryNotFoundError(f"{LIBRARY_NAME} was not built or not found; {_BUILD_HINT}")


def _onnxruntime():
    from graphopt.dependencies import require

    return require("onnxruntime", "an ONNX Runtime session")


def _default_providers() -> list[str]:
    onnxruntime = _onnxruntime()

    # The providers the library has kernels for, best first. Passing them explicitly also
    # avoids ORT's refusal to guess when a GPU build offers several.
    available = set(onnxruntime.get_available_providers())
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]


def create_session(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    providers: list[Any] | None = None,
    use_library: bool = True,
    **session_options: Any,
) -> onnxruntime.InferenceSession:
    """An ``onnxruntime.InferenceSession`` with the graphopt custom-op library registered.

    ``model`` is a path, serialized bytes or an ``onnx.ModelProto``. ``providers`` defaults to
    CUDA (when this onnxruntime has it) then CPU. ``use_library=False`` makes a plain session,
    e.g. to run the models' fallback functions for comparison. Keyword arguments set attributes of
    ``onnxruntime.SessionOptions`` (``intra_op_num_threads=1``, ``enable_profiling=True``, ...).
    """
    onnxruntime = _onnxruntime()
    options = onnxruntime.SessionOptions()
    for name, value in session_options.items():
        if name.startswith("_") or not hasattr(options, name) or callable(getattr(options, name)):
            valid = ", ".join(
                n for n in dir(options) if not n.startswith("_") and not callable(getattr(options, n))
            )
            raise TypeError(f"unknown session option {name!r}; onnxruntime.SessionOptions has: {valid}")
        setattr(options, name, value)
    if use_library:
        options.register_custom_ops_library(library_path())

    if isinstance(model, (str, os.PathLike)):
        source: str | bytes = os.fspath(model)
    elif isinstance(model, bytes):
        source = model
    elif hasattr(model, "SerializeToString"):
        source = model.SerializeToString()
    else:
        raise TypeError(f"model must be a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    return onnxruntime.InferenceSession(
        source, options, providers=providers if providers is not None else _default_providers()
    )
