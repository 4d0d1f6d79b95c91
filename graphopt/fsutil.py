"""Atomic file writes: write beside the target under a temporary name, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def temp_beside(target: Path) -> Path:
    """A new empty temporary file in ``target``'s directory (so the final rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    return Path(name)


@contextlib.contextmanager
def atomic_target(target: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path; on success it replaces ``target``, on failure it is removed."""
    target = Path(target)
    temp = temp_beside(target)
    try:
        yield temp
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def write_text_atomic(target: str | os.PathLike, text: str) -> Path:
    with atomic_target(target) as temp:
        temp.write_text(text)
    return Path(target)
