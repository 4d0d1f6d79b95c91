"""Reading a ``.pt2`` archive (``torch.export.save``), with one clear line for everything that can be
wrong with it: not a zip, a zip of something else, an AOTInductor package, a truncated or corrupted
archive, a program torch cannot deserialize.

The archive is checked before torch reads it: torch's reader does not verify checksums (a flipped
bit in a weight loads silently), logs a traceback for archives it cannot open, unpickles what the
archive asks it to (refused unless trusted: pt2_pickles), evaluates its size expressions
(pt2_expressions) and writes its names and guards into code it runs (pt2_program_code).

torch is then given a copy of the archive made of the entries as the checks read them, never the file
itself: Python's zipfile and torch's zip reader find a zip's directory differently (data before the
archive, a second central directory or zip64 record), so a crafted file can show the checks one program
and torch another.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path

from ..errors import BadInput
from .onnx_read import check_file
from .pt2_expressions import check_size_expressions, parse_document
from .pt2_pickles import LEGACY_PICKLES, check_no_pickles
from .pt2_program_code import check_program_code

log = logging.getLogger(__name__)

EXPECTED = "expected a torch.export archive written by torch.export.save"
# how a serialized program names a graphopt op
FUSED_MARKERS = (b"torch.ops.graphopt.", b"graphopt::")


def read_pt2(path) -> object:
    """The ExportedProgram in ``path``."""
    path = check_file(path, "a torch.export archive (.pt2)")
    with tempfile.TemporaryDirectory(prefix="graphopt-pt2-") as scratch:
        checked = Path(scratch) / "checked.pt2"
        fused = _check_archive(path, checked)
        if fused:
            _register_fused_ops()
        return _load(path, checked)


def _load(path: Path, checked: Path) -> object:
    """torch.export.load of the checked copy ``checked`` of ``path``."""
    import torch

    try:
        with _quiet_torch_export(), open(checked, "rb") as stream:
            program = torch.export.load(stream)
    except Exception as error:  # torch raises many kinds here; each means the archive is unusable
        detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
        detail = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
        raise BadInput(f"{path}: torch.export.load cannot read it ({detail[:300]}); {EXPECTED}") from None
    if type(program).__name__ != "ExportedProgram":
        raise BadInput(f"{path} holds a {type(program).__name__}, not an exported program; {EXPECTED}")
    return program


def _check_archive(path: Path, checked: Path) -> bool:
    """Validates the zip container and writes the entries it checked to ``checked``; returns whether the
    program uses graphopt's fused ops."""
    if not zipfile.is_zipfile(path):
        raise BadInput(f"{path} is not a torch.export archive (not a zip file); {EXPECTED}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            _check_unique_names(path, names)
            # (torch loads every entry of a models/ folder as a program, whatever its suffix)
            models = [n for n in names if _is_program(n)]
            legacy = "version" in names  # the archive layout of older torch releases
            if not legacy and not any(n.endswith("/archive_format") for n in names):
                raise BadInput(
                    f"{path} is a zip file without a torch.export archive in it (no archive_format "
                    f"record; a torch.save checkpoint or another zip?); {EXPECTED}"
                )
            if not legacy and not models:
                raise BadInput(
                    f"{path} is a PT2 archive without an exported program (an AOTInductor package?); "
                    f"{EXPECTED}"
                )
            _check_inflation(path, archive)
            _copy_entries(path, archive, checked)  # (every entry read once, its checksum verified)
            check_no_pickles(path, archive)
            # (the JSON entries and programs, each read once and parsed whole: the size expressions,
            # the strings torch writes into code, and the fused ops; the older layout's pickles under
            # a .json name are pt2_pickles' concern)
            documents = {
                n: archive.read(n)
                for n in names
                if (n.lower().endswith(".json") or _is_program(n)) and n not in LEGACY_PICKLES
            }
            parsed = {n: parse_document(path, n, data) for n, data in documents.items()}
            check_size_expressions(path, parsed)
            for name, data in documents.items():
                check_program_code(path, name, data, parsed[name])
            programs = sorted({_program_name(n) for n in models})
            if not legacy and programs != ["model"]:
                # (after the checks of what each entry holds; torch.export.load returns the program
                # named "model" alone: the others would be lost)
                listed = ", ".join(repr(p) for p in programs[:5]) + (" ..." if len(programs) > 5 else "")
                raise BadInput(
                    f"{path} holds {len(programs)} exported programs ({listed}); graphopt optimizes an "
                    f"archive of one program named 'model', as torch.export.save writes it: save each "
                    f"program to its own archive"
                )
            return any(marker in documents[n] for n in models for marker in FUSED_MARKERS)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as error:
        # (NotImplementedError: a damaged header names a compression method zipfile does not have)
        raise BadInput(f"{path} is a damaged zip archive ({error}); {EXPECTED}") from None


def _is_program(name: str) -> bool:
    """Whether torch.export.load reads the entry ``name`` as a serialized program: any entry of the
    models/ folder below the archive's root (names compared without case, as torch's reader does)."""
    return name.lower().split("/", 1)[-1].startswith("models/")


def _program_name(name: str) -> str:
    """The program a models/ entry belongs to: ``models/NAME.json`` (its weights live elsewhere)."""
    stem = name.split("/", 1)[-1][len("models/") :]
    return stem.split("/", 1)[0].rsplit(".", 1)[0] if stem else ""


def _check_unique_names(path: Path, names: list[str]) -> None:
    """Raises BadInput for two entries whose names differ at most in case: zipfile and torch's reader
    (which ignores case) could each take a different one."""
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise BadInput(
                f"{path} has two entries named {name!r} (names compared without case, as torch reads "
                f"them); {EXPECTED}"
            )
        seen.add(name.lower())


def _copy_entries(path: Path, archive: zipfile.ZipFile, checked: Path) -> None:
    """Writes every entry of ``archive`` as zipfile reads it, uncompressed, to a new zip ``checked``
    (the only file torch is given); raises BadInput for an entry that fails its checksum."""
    with zipfile.ZipFile(checked, "w", zipfile.ZIP_STORED, allowZip64=True) as copy:
        for info in archive.infolist():
            if info.is_dir():
                copy.writestr(info.filename, b"")
                continue
            try:
                with archive.open(info) as source, copy.open(info.filename, "w", force_zip64=True) as target:
                    shutil.copyfileobj(source, target, 1 << 20)
            except zipfile.BadZipFile:
                bad = f"{info.filename!r} fails its checksum"
                raise BadInput(f"{path} is corrupt: {bad}; {EXPECTED}") from None


# An entry that inflates past this many bytes, at more than this ratio to its stored size, is taken for
# a zip bomb: torch.export.save stores every entry uncompressed, and an archive recompressed by another
# tool gets ratios far below this (its JSON some 10-30) unless a large tensor is all one value.
BOMB_BYTES = 256 << 20
BOMB_RATIO = 200


def _check_inflation(path: Path, archive: zipfile.ZipFile) -> None:
    """Raises BadInput for an entry that would inflate far beyond its stored bytes (the checks below
    and torch read entries whole)."""
    for info in archive.infolist():
        if info.file_size > BOMB_BYTES and info.file_size > BOMB_RATIO * max(info.compress_size, 1):
            raise BadInput(
                f"{path}: entry {info.filename!r} inflates to {info.file_size / 2**30:.1f} GiB from "
                f"{info.compress_size / 2**20:.1f} MiB (a zip bomb?); {EXPECTED}"
            )


def _register_fused_ops() -> None:
    """Programs holding torch.ops.graphopt.* load only once those ops are registered."""
    try:
        import graphopt.fused.torch_ops  # noqa: F401
    except ImportError as error:  # the archive load then names the missing op
        log.warning("cannot register graphopt's torch ops: %s", error)


@contextlib.contextmanager
def _quiet_torch_export():
    """torch.export.load logs a traceback before raising (the raised error is what we report) and warns
    about its own deprecations."""
    logger = logging.getLogger("torch.export")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            # torch's own deprecation notices about its pickled pytree specs are not the user's concern
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)
