"""Loading any supported model into the IR, and writing the optimized model back in its own format."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from .errors import BadInput
from .ir import Graph

SUPPORTED = (
    "an ONNX model (.onnx), a torch.export archive (.pt2), an onnx.ModelProto "
    "or a torch.export.ExportedProgram"
)


@dataclass
class Source:
    """A loaded model: its graph, where it came from, and what the numeric check runs as the original."""

    graph: Graph
    frontend: str  # "onnx" or "torch"
    label: str
    path: Path | None
    original: Any


def load(model: Any) -> Source:
    if isinstance(model, str | os.PathLike):
        path = Path(model)
        if _is_torch_archive(path):
            from .frontends.torch_export import load_pt2

            program = load_pt2(path)
            return _from_program(program, str(path), path)
        from .frontends.onnx import from_onnx
        from .frontends.onnx_read import read_onnx

        proto = read_onnx(path)
        graph = _loading(
            lambda: from_onnx(proto, base_dir=path.parent, where=str(path), path=path, read_checked=True),
            str(path),
        )
        return Source(graph, "onnx", str(path), path, path)
    if isinstance(model, onnx.ModelProto):
        from .frontends.onnx import from_onnx

        graph = _loading(lambda: from_onnx(model, where="the ModelProto"), "the ModelProto")
        return Source(graph, "onnx", "<onnx.ModelProto>", None, model)
    if _is_exported_program(model):
        return _from_program(model, "<ExportedProgram>", None)
    raise BadInput(f"cannot optimize a {type(model).__name__}; expected {SUPPORTED}")


def _from_program(program, label: str, path: Path | None) -> Source:
    from .frontends.torch_export import from_exported_program

    graph = _loading(lambda: from_exported_program(program), label)
    return Source(graph, "torch", label, path, program)


def _loading(build, label: str) -> Graph:
    from .ir import GraphError

    try:
        return build()
    except GraphError as error:
        raise BadInput(f"{label} is not a valid graph: {error}") from None


def to_model(source: Source) -> Any:
    """The optimized model, in the format it came in."""
    if source.frontend == "onnx":
        from .backends.onnx import to_onnx

        return to_onnx(source.graph)
    from .backends.torch_export import to_exported_program

    return to_exported_program(source.graph)


def write(model: Any, path: str | os.PathLike, source: Source) -> Path:
    """Writes atomically (temporary file, then rename)."""
    path = Path(path)
    if isinstance(model, onnx.ModelProto):
        from .backends.onnx_write import save_onnx

        base = source.path.parent if source.path is not None else source.graph.meta.get("base_dir")
        return save_onnx(model, path, source_dir=base)
    from .backends.torch_export import save_pt2

    return save_pt2(model, path)


def default_output(path: Path) -> Path:
    """``model.onnx`` → ``model.opt.onnx``."""
    return path.with_name(f"{path.stem}.opt{path.suffix}")


def _is_torch_archive(path: Path) -> bool:
    if path.suffix == ".pt2":
        return True
    try:
        return path.is_file() and zipfile.is_zipfile(path)
    except OSError:
        return False


def _is_exported_program(model: Any) -> bool:
    return type(model).__name__ == "ExportedProgram" and type(model).__module__.startswith("torch.export")
