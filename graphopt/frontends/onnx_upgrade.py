"""Models older than opset 7: upgraded with onnx.version_converter, or carried through untouched.

ONNX Runtime still runs many opset 1-6 models (it only guarantees 7 and newer), so graphopt must not
refuse them. Their ops differ from today's (``broadcast`` attributes, ``Reshape`` and ``Cast`` read
differently), so the passes see them only after an upgrade; a model the converter cannot upgrade is
written back as it came in.
"""

from __future__ import annotations

import logging

import onnx
from onnx import version_converter

from ..fused.onnx_decompose import MIN_OPSET as FUSED_OPS_MIN_OPSET
from .onnx_read import MIN_OPSET

log = logging.getLogger(__name__)

# The oldest opset the fused ops' fallback functions are written for first (the passes can then fuse),
# else the oldest one graphopt reads.
UPGRADE_TARGETS = (FUSED_OPS_MIN_OPSET, MIN_OPSET)


def default_opset(model: onnx.ModelProto) -> int | None:
    versions = [e.version for e in model.opset_import if e.domain in ("", "ai.onnx")]
    return max(versions) if versions else None


def upgrade_old_opset(model: onnx.ModelProto, where: str) -> tuple[onnx.ModelProto, str | None]:
    """The model at an opset graphopt reads, with a note saying what was done; an opset 1-6 model the
    converter cannot upgrade comes back as it is (``is_too_old`` then tells the caller to carry it)."""
    version = default_opset(model)
    if version is None or version >= MIN_OPSET:
        return model, None
    problems = []
    for target in UPGRADE_TARGETS:
        try:
            upgraded = version_converter.convert_version(model, target)
            onnx.checker.check_model(upgraded)
        except Exception as error:  # the converter raises RuntimeError, ValidationError, IndexError...
            problems.append(f"to opset {target}: {_reason(error)}")
            continue
        note = (
            f"{where} imports default-domain opset {version}: upgraded to opset {target} "
            "with onnx.version_converter"
        )
        log.info("%s", note)
        return upgraded, note
    note = (
        f"{where} imports default-domain opset {version}, which onnx.version_converter could not upgrade "
        f"({problems[-1]}): carried through untouched"
    )
    log.info("%s", note)
    return model, note


def _reason(error: Exception) -> str:
    """The converter's message without its source location and assertion text, shortened."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    text = text.rsplit(" failed: ", 1)[-1]
    return text if len(text) <= 100 else text[:97] + "..."


def is_too_old(model: onnx.ModelProto) -> bool:
    version = default_opset(model)
    return version is not None and version < MIN_OPSET
