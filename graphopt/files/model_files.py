"""Loading any supported model into the IR, and writing the optimized model back in its own format."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ..errors import BadInput, OutputError
from ..ir import Graph

SUPPORTED = (
    "an ONNX model (.onnx), a torch.export archive (.pt2), an onnx.ModelProto "
    "or a torch.export.ExportedProgram"
)
# The file name ending of each format: an optimized model is written in the format it came in.
SUFFIXES = {"onnx": ".onnx", "torch": ".pt2"}


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
            from ..frontends.torch_export import load_pt2

            program = load_pt2(path)
            return _from_program(program, str(path), path)
        from ..frontends.onnx import from_onnx
        from ..frontends.onnx_read import read_onnx

        proto = read_onnx(path)
        graph = _loading(
            lambda: from_onnx(proto, base_dir=path.parent, where=str(path), path=path, read_checked=True),
            str(path),
        )
        return Source(graph, "onnx", str(path), path, path)
    if isinstance(model, onnx.ModelProto):
        from ..frontends.onnx import from_onnx

        graph = _loading(lambda: from_onnx(model, where="the ModelProto"), "the ModelProto")
        return Source(graph, "onnx", "<onnx.ModelProto>", None, model)
    if _is_exported_program(model):
        return _from_program(model, "<ExportedProgram>", None)
    raise BadInput(f"cannot optimize a {type(model).__name__}; expected {SUPPORTED}")


def _from_program(program, label: str, path: Path | None) -> Source:
    from ..frontends.torch_export import from_exported_program

    graph = _loading(lambda: from_exported_program(program), label)
    return Source(graph, "torch", label, path, program)


def _loading(build, label: str) -> Graph:
    from ..ir import GraphError

    try:
        return build()
    except GraphError as error:
        raise BadInput(f"{label} is not a valid graph: {error}") from None


def to_model(source: Source) -> Any:
    """The optimized model, in the format it came in."""
    if source.frontend == "onnx":
        from ..backends.onnx import to_onnx

        return to_onnx(source.graph)
    from ..backends.torch_export import to_exported_program

    return to_exported_program(source.graph)


def write(model: Any, path: str | os.PathLike, source: Source) -> Path:
    """Writes atomically (temporary file, then rename); a file system error becomes OutputError."""
    from .atomic import writing

    path = Path(path)
    with writing(path):
        if isinstance(model, onnx.ModelProto):
            from ..backends.onnx_write import save_onnx

            base = source.path.parent if source.path is not None else source.graph.meta.get("base_dir")
            return save_onnx(model, path, source_dir=base)
        from ..backends.torch_export import save_pt2

        extra = _pt2_extra_files(source.path) if source.path is not None else None
        return save_pt2(model, path, extra_files=extra)


def _pt2_extra_files(path: Path) -> dict[str, str] | None:
    """The extra files (``torch.export.save(..., extra_files=...)``: text under ``<archive>/extra/``) of the
    .pt2 archive at ``path``, to be written into the optimized archive as well; None if it has none."""
    if not _is_torch_archive(path):
        return None
    found = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            parts = info.filename.split("/", 2)
            if len(parts) == 3 and parts[1] == "extra" and parts[2] and not info.is_dir():
                try:  # (torch.export.save writes them as text, and torch.export.load reads them so)
                    found[parts[2]] = archive.read(info).decode("utf-8")
                except UnicodeDecodeError:
                    raise BadInput(f"{path}: extra file {parts[2]!r} is not UTF-8 text") from None
    return found or None


def data_file(output: str | os.PathLike) -> Path:
    """Where an ONNX model written to ``output`` keeps its external weights, when it has any."""
    output = Path(output)
    return output.with_name(f"{output.name}.data")


def check_output(model: Any, output: str | os.PathLike) -> Path:
    """Refuses, before any work, an output path for the optimized ``model`` that graphopt must not or
    cannot write: one whose extension is not the model's format, a directory, an unwritable place."""
    from ..frontends.onnx_read import check_file
    from .atomic import check_writable

    if isinstance(model, str | os.PathLike):  # (a missing or empty input is named first)
        check_file(model, "an ONNX model (.onnx) or a torch.export archive (.pt2)")
    output = Path(output)
    kind = input_format(model)
    if kind is not None and output.suffix.lower() != SUFFIXES[kind]:
        found = f"a {output.suffix} file name" if output.suffix else "a name without an extension"
        raise OutputError(
            f"the output {output} has {found}; expected a {SUFFIXES[kind]} file: graphopt writes the "
            f"model in the format it came in ({'ONNX' if kind == 'onnx' else 'a torch.export archive'})"
        )
    check_writable(output, "the output")
    if kind == "onnx":
        check_writable(data_file(output), "the output's data file")
    return output


def refuse_input_files(source: Source, outputs: dict[str, str | os.PathLike | None]) -> None:
    """Refuses any output (named by what it is: "the output", "--report-json") that is a file the input
    is read from: the model file and, for ONNX, its external data files."""
    model = source.path.resolve() if source.path is not None else None
    data = external_data_files(source)
    for what, path in outputs.items():
        if path is None:
            continue
        resolved = Path(path).resolve()
        if resolved == model:
            raise OutputError(f"refusing to overwrite the input {path} ({what}); choose another path")
        if resolved in data:
            raise OutputError(
                f"refusing to write {what} {path}: the input reads its weights from it; choose another path"
            )


def external_data_files(source: Source) -> set[Path]:
    """The external data files (resolved) a loaded ONNX model reads its weights from."""
    proto = source.graph.meta.get("onnx_model")
    base = source.graph.meta.get("base_dir")
    if proto is None or base is None:
        return set()
    from ..frontends.onnx_read import external_files

    return {p.resolve() for p in external_files(proto, Path(base))}


def input_format(model: Any) -> str | None:
    """The format a model comes in: "onnx" or "torch" (None for something graphopt cannot read)."""
    if isinstance(model, str | os.PathLike):
        return "torch" if _is_torch_archive(Path(model)) else "onnx"
    if isinstance(model, onnx.ModelProto):
        return "onnx"
    return "torch" if _is_exported_program(model) else None


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
