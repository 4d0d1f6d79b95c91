"""Atomic file writes: write beside the target under a temporary name, then rename.

A temporary is created with mode 0666 less the umask, as any file a tool writes, so the renamed file
has the permissions the user expects. Its name says whose it is (``.model.onnx.graphopt-PID-HOST-XXXX.tmp``):
a run killed before it could clean up (SIGKILL, a power cut) leaves one behind, and a later write into
the same folder removes those whose process on this host is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import OutputError

_TAG = "graphopt"
_STALE = re.compile(rf"^\..+\.{_TAG}-(?P<pid>\d+)-(?P<host>[A-Za-z0-9-]*)-[0-9a-f]{{8}}\.tmp$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40]


def temp_beside(target: Path) -> Path:
    """A new empty temporary file in ``target``'s directory (so the final rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    prefix = f".{target.name}.{_TAG}-{os.getpid()}-{_host()}-"
    while True:
        path = target.parent / f"{prefix}{secrets.token_hex(4)}.tmp"
        try:
            # 0o666: the kernel applies the umask, as it does for any file a program creates
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(handle)
        return path


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Removes temporaries in ``folder`` that a graphopt process on this host left and no longer owns."""
    removed = []
    host = _host()
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        found = _STALE.match(name)
        if found is None or found["host"] != host or _alive(int(found["pid"])):
            continue
        with contextlib.suppress(OSError):
            (folder / name).unlink()
            removed.append(folder / name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return True
    return True


@contextlib.contextmanager
def atomic_target(target: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path; on success it replaces ``target``, on failure it is removed. An error of
    the file system (full disk, read-only, permissions) becomes OutputError, naming ``target``."""
    target = Path(target)
    with writing(target):
        temp = temp_beside(target)
        try:
            yield temp
            os.replace(temp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()


@contextlib.contextmanager
def writing(target: Path) -> Iterator[None]:
    """Turns an OSError raised while writing ``target`` into one line that names it."""
    try:
        yield
    except OSError as error:
        raise OutputError(f"cannot write {target}: {_reason(error)}") from None


def _reason(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "no space left on the device"
    if error.errno == errno.EROFS:
        return "the file system is read-only"
    return error.strerror or str(error)


def write_text_atomic(target: str | os.PathLike, text: str) -> Path:
    with atomic_target(target) as temp:
        temp.write_text(text)
    return Path(target)


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """Refuses (OutputError) an output path graphopt could not write: a directory, something other
    than a regular file, a folder that is missing and cannot be made, or one it may not write in."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputError(f"{what} {path}: {_reason(error)}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{what} {path} is a directory; expected a file path")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"{what} {path} exists and is not a regular file; expected a file path")
    folder = path.parent
    while not folder.exists():  # (written folders are made first: the nearest existing one decides)
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{what} {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        reason = "the file system is read-only" if _read_only(folder) else "permission denied"
        raise OutputError(f"{what} {path}: cannot write in {folder} ({reason})")
    return path


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
