"""Reading a ``.pt2`` archive (``torch.export.save``), with one clear line for everything that can be
wrong with it: not a zip, a zip of something else, an AOTInductor package, a truncated or corrupted
archive, a program torch cannot deserialize.

The archive is checked before torch reads it: torch's reader does not verify checksums (a flipped
bit in a weight loads silently), logs a traceback for archives it cannot open, and unpickles what the
archive asks it to (refused unless trusted: pt2_pickles).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
import zipfile
import zlib
from pathlib import Path

from ..errors import BadInput
from .onnx_read import check_file
from .pt2_expressions import check_size_expressions
from .pt2_pickles import check_no_pickles

log = logging.getLogger(__name__)

EXPECTED = "expected a torch.export archive written by torch.export.save"
# how a serialized program names a graphopt op
FUSED_MARKERS = (b"torch.ops.graphopt.", b"graphopt::")


def read_pt2(path) -> object:
    """The ExportedProgram in ``path``."""
    path = check_file(path, "a torch.export archive (.pt2)")
    fused = _check_archive(path)
    if fused:
        _register_fused_ops()
    import torch

    try:
        with _quiet_torch_export(), open(path, "rb") as stream:
            program = torch.export.load(stream)
    except Exception as error:  # torch raises many kinds here; each means the archive is unusable
        detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
        detail = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
        raise BadInput(f"{path}: torch.export.load cannot read it ({detail[:300]}); {EXPECTED}") from None
    if type(program).__name__ != "ExportedProgram":
        raise BadInput(f"{path} holds a {type(program).__name__}, not an exported program; {EXPECTED}")
    return program


def _check_archive(path: Path) -> bool:
    """Validates the zip container; returns whether the program uses graphopt's fused ops."""
    if not zipfile.is_zipfile(path):
        raise BadInput(f"{path} is not a torch.export archive (not a zip file); {EXPECTED}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            models = [n for n in names if "/models/" in n and n.endswith(".json")]
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
            bad = archive.testzip()
            if bad is not None:
                raise BadInput(f"{path} is corrupt: {bad!r} fails its checksum; {EXPECTED}")
            check_no_pickles(path, archive)
            # (the JSON entries, each read once: the programs' size expressions and fused ops)
            documents = {n: archive.read(n) for n in names if n.lower().endswith(".json")}
            check_size_expressions(path, documents)
            return any(marker in documents[n] for n in models for marker in FUSED_MARKERS)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as error:
        # (NotImplementedError: a damaged header names a compression method zipfile does not have)
        raise BadInput(f"{path} is a damaged zip archive ({error}); {EXPECTED}") from None


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
