"""The two `torch.onnx.export` paths, called quietly and returning a `ModelProto`.

`dynamo=True` goes through torch.export and onnxscript (the current exporter); `dynamo=False` is the
TorchScript exporter. Both are pinned to one opset so that the graphs do not drift with the torch version.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import onnx
import torch

DEFAULT_OPSET = 20


@contextlib.contextmanager
def _reused_torchlib_registry() -> Iterator[None]:
    """Build the dynamo exporter's op registry once per opset instead of once per export.

    Building it takes about a second, most of a tiny model's export. We only reuse it for our own calls,
    which pass no custom translation table (the one thing that writes into it), and we restore the
    original afterwards. Where the private hook is missing (another torch version) nothing changes.
    """
    try:
        from torch.onnx._internal.exporter import _registration
    except ImportError:
        yield
        return
    registry_class = getattr(_registration, "ONNXRegistry", None)
    original = vars(registry_class).get("from_torchlib") if registry_class is not None else None
    if not isinstance(original, classmethod):
        yield
        return

    def from_torchlib(cls, opset_version=DEFAULT_OPSET):
        if opset_version not in _registries:
            _registries[opset_version] = original.__func__(cls, opset_version=opset_version)
        return _registries[opset_version]

    registry_class.from_torchlib = classmethod(from_torchlib)
    try:
        yield
    finally:
        registry_class.from_torchlib = original


_registries: dict[int, object] = {}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # The exporters warn about optional packages (torchvision) and deprecations; tests want clean output.
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export_dynamo(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    *,
    opset: int = DEFAULT_OPSET,
    dynamic_shapes: Any = None,
) -> onnx.ModelProto:
    """Export with the dynamo (torch.export-based) exporter; input names are the forward's parameters."""
    with _quiet(), _reused_torchlib_registry():
        program = torch.onnx.export(
            module, args, dynamo=True, opset_version=opset, dynamic_shapes=dynamic_shapes, verbose=False
        )
    return program.model_proto


def export_torchscript(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    *,
    input_names: Sequence[str],
    output_names: Sequence[str] = ("output",),
    opset: int = DEFAULT_OPSET,
    dynamic_axes: dict[str, dict[int, str]] | None = None,
) -> onnx.ModelProto:
    """Export with the TorchScript exporter (tracing, or the module itself if it is scripted)."""
    buffer = io.BytesIO()
    with _quiet():
        torch.onnx.export(
            module,
            args,
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=dynamic_axes,
        )
    return onnx.load_from_string(buffer.getvalue())
