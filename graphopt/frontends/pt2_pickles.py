"""What a ``.pt2`` archive would make torch.export.load unpickle, found before torch reads it.

torch.export.load runs Python's full unpickler, which calls whatever the pickle names (so a planted
pickle runs code), on: a weight or tensor constant whose payload config says ``use_pickle``, custom
and opaque objects among the constants, AOTInductor code, and the sample inputs and legacy weight
files whenever its weights-only unpickler refuses them. graphopt refuses such an archive unless the
caller trusts it (``trust_pickle=True`` in Python, ``--trust-pickle`` on the command line). What the
weights-only unpickler accepts (tensors and plain containers) runs no code and is allowed.

Names are compared without case, as torch's zip reader finds them (pt2_read refuses two entries whose
names differ only in case, whether or not pickles are trusted: the checks must see the bytes torch reads).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import warnings
import zipfile
from collections.abc import Iterator

from ..errors import BadInput

TRUST_HINT = "pass --trust-pickle (trust_pickle=True in Python) only if you trust whoever wrote the file"

_trusted: contextvars.ContextVar[bool] = contextvars.ContextVar("graphopt_trust_pickle", default=False)

# Entries of an archive whose payload config lists pickled payloads, and the prefixes of payload files
# that torch always unpickles (torchbind objects, arbitrary Python objects).
_CONFIG_SUFFIXES = ("_weights_config.json", "_constants_config.json")
_PICKLED_PREFIXES = ("custom_obj_", "opaque_obj_")
_COMPILED_CODE_DIR = "data/aotinductor/"
# The older archive layout's pickled weights and constants under a .json name (torch.export.load reads
# them by these exact names, weights-only first, then with the full unpickler).
LEGACY_PICKLES = frozenset({"serialized_state_dict.json", "serialized_constants.json"})


@contextlib.contextmanager
def pickle_trust(trust: bool) -> Iterator[None]:
    """Within this block, archives that would unpickle objects load (``trust``) or are refused."""
    token = _trusted.set(trust)
    try:
        yield
    finally:
        _trusted.reset(token)


def check_no_pickles(path, archive: zipfile.ZipFile) -> None:
    """Raises BadInput if loading the archive would unpickle objects or load compiled code, unless
    the caller trusts pickles (see pickle_trust)."""
    if _trusted.get():
        return
    found = list(_unpickled_entries(path, archive))
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise BadInput(
            f"{path} would make torch.export.load unpickle objects, which can run any code: "
            f"{found[0]}{more}; refused before torch read it; {TRUST_HINT}"
        )


def _unpickled_entries(path, archive: zipfile.ZipFile) -> Iterator[str]:
    for info in archive.infolist():
        key = info.filename.lower()
        inner = key.split("/", 1)[-1]  # (torch reads names below the archive's root folder)
        if inner.startswith(_COMPILED_CODE_DIR) or key.startswith(_COMPILED_CODE_DIR):
            yield f"{info.filename!r} is AOTInductor code, which torch would load and run too"
        elif key.endswith(_CONFIG_SUFFIXES):
            yield from _pickled_payloads(path, info, archive.read(info))
        elif (
            (key.endswith(".pt") or info.filename in LEGACY_PICKLES)
            and info.file_size
            and not _weights_only(archive.read(info))
        ):
            yield f"{info.filename!r} holds objects that only the full unpickler would load"


def _pickled_payloads(path, info: zipfile.ZipInfo, data: bytes) -> Iterator[str]:
    try:
        config = json.loads(data)["config"]
        items = list(config.items())
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BadInput(
            f"{path}: {info.filename!r} is not a payload config torch.export.save writes; expected "
            "a torch.export archive"
        ) from None
    for name, payload in items:
        if not isinstance(payload, dict):
            continue  # (torch cannot read it either)
        file = str(payload.get("path_name", ""))
        if payload.get("use_pickle") or file.lower().startswith(_PICKLED_PREFIXES):
            yield f"{name!r} is pickled ({info.filename!r} says so)"


def _weights_only(data: bytes) -> bool:
    """Whether torch's weights-only unpickler, which runs no code, loads ``data`` (torch.export.load
    tries it first and falls back to the full unpickler where it fails)."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (its notes on pickle protocols are not the user's concern)
            torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception:  # any refusal means torch would fall back to the full unpickler
        return False
    return True
