"""Reading and validating an ONNX file, with one clear line for everything that can be wrong with it."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ..errors import BadInput

# Oldest default-domain opset graphopt reads: the oldest ONNX Runtime guarantees to run. Older models
# are upgraded, or else carried through untouched (onnx_upgrade.py).
MIN_OPSET = 7
EXPECTED = "expected an ONNX model written by onnx.save or an exporter"


def check_file(path: str | os.PathLike, kind: str) -> Path:
    """The path as a Path, if it names a readable non-empty file."""
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: no such file; expected {kind}")
    if path.is_dir():
        raise BadInput(f"{path} is a directory; expected {kind} file")
    if path.stat().st_size == 0:
        raise BadInput(f"{path} is empty (0 bytes); expected {kind}")
    return path


def read_onnx(path: str | os.PathLike) -> onnx.ModelProto:
    """Parses the model's protobuf, leaving external weights on disk."""
    path = check_file(path, "an ONNX model (.onnx)")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise BadInput(
            f"{path} is not an ONNX model: its protobuf does not parse ({detail}); {EXPECTED}"
        ) from None
    tensors = check_model_proto(model, str(path))
    check_external_data(model, path.parent, str(path), tensors)
    return model


def check_model_proto(model: onnx.ModelProto, where: str) -> list[onnx.TensorProto]:
    """Checks the header and the size of every tensor; returns the tensors (initializers and attribute
    tensors, subgraphs included), which check_external_data can take instead of walking every node
    again."""
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise BadInput(
            f"{where} is a protobuf message but not an ONNX model (no IR version or no graph); {EXPECTED}"
        )
    if model.ir_version > onnx.IR_VERSION:
        raise BadInput(
            f"{where} uses ONNX IR version {model.ir_version}; this graphopt reads IR versions up to "
            f"{onnx.IR_VERSION} (onnx {onnx.__version__})"
        )
    newest = onnx.defs.onnx_opset_version()
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx") and not 1 <= entry.version <= newest:
            raise BadInput(
                f"{where} imports default-domain opset {entry.version}; expected an opset from 1 to {newest}"
            )
    if not model.graph.output:
        raise BadInput(f"{where} has a graph with no outputs; {EXPECTED}")
    _check_text_fields(model, where)
    check_names(model.graph, where)
    tensors = list(all_tensors(model.graph))
    for tensor in tensors:
        check_tensor_size(tensor, where)
    return tensors


# Where each element type keeps its values when they are not raw bytes (and how many per element).
_TYPED_FIELDS = {
    onnx.TensorProto.FLOAT: ("float_data", 1),
    onnx.TensorProto.DOUBLE: ("double_data", 1),
    onnx.TensorProto.INT64: ("int64_data", 1),
    onnx.TensorProto.UINT32: ("uint64_data", 1),
    onnx.TensorProto.UINT64: ("uint64_data", 1),
    onnx.TensorProto.COMPLEX64: ("float_data", 2),
    onnx.TensorProto.COMPLEX128: ("double_data", 2),
}


def check_tensor_size(tensor: onnx.TensorProto, where: str) -> None:
    """The tensor's data holds exactly what its dims and element type say (checked without reading
    external data): a damaged size would otherwise fail deep inside a pass that reads the values."""
    data_type, dims = tensor.data_type, list(tensor.dims)
    if data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED) or any(d < 0 for d in dims):
        return  # (the checker names these)
    count = math.prod(dims)
    itemsize = _itemsize(data_type)
    if itemsize is None:
        return  # an element type this onnx does not know: the checker names it
    name = tensor.name or "(unnamed)"
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        length = _external_info(tensor, where).get("length")
        if length is not None and length != count * itemsize:
            raise BadInput(
                f"{where}: tensor {name!r} has {length} bytes of external data; its shape "
                f"{dims} and type need {count * itemsize}"
            )
        return
    if tensor.HasField("raw_data"):
        if len(tensor.raw_data) != count * itemsize:
            raise BadInput(
                f"{where}: tensor {name!r} holds {len(tensor.raw_data)} bytes; its shape {dims} "
                f"and type need {count * itemsize}"
            )
        return
    field, per_element = _TYPED_FIELDS.get(data_type, ("int32_data", 1))
    stored = len(getattr(tensor, field))
    if stored and stored != count * per_element:
        raise BadInput(
            f"{where}: tensor {name!r} holds {stored} values; its shape {dims} needs {count * per_element}"
        )


@functools.cache
def _itemsize(data_type: int) -> int | None:
    """Bytes per element of an ONNX element type; None for one this onnx does not know."""
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None


def _external_info(tensor: onnx.TensorProto, where: str) -> dict:
    """location (text), offset and length (non-negative integers) of an externally stored tensor."""
    info: dict = {}
    for entry in tensor.external_data:
        key, value = entry.key, entry.value
        if not isinstance(value, str) or not isinstance(key, str):
            raise BadInput(f"{where}: tensor {tensor.name!r} has external data fields that are not text")
        if key in ("offset", "length"):
            if not value.isdigit():
                raise BadInput(
                    f"{where}: tensor {tensor.name!r} has external data {key} {value!r}; expected a "
                    "non-negative integer"
                )
            info[key] = int(value)
        else:
            info[key] = value
    return info


def check_external_data(
    model: onnx.ModelProto, base_dir: Path, where: str, tensors: list[onnx.TensorProto] | None = None
) -> None:
    """Every externally stored tensor must lie inside an existing file next to the model. ``tensors``:
    the model's, as check_model_proto returns them."""
    for tensor in all_tensors(model.graph) if tensors is None else tensors:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = _external_info(tensor, where)
        location = info.get("location", "")
        if not location or "\0" in location or Path(location).is_absolute() or ".." in Path(location).parts:
            raise BadInput(
                f"{where}: tensor {tensor.name!r} names external data {location!r}; "
                "expected a file beside the model"
            )
        folder = base_dir.resolve()
        file = (base_dir / location).resolve()
        if not file.is_relative_to(folder):
            # (a symbolic link beside the model that leads elsewhere: the data must be the model's own)
            raise BadInput(
                f"{where}: tensor {tensor.name!r} keeps its data in {location!r}, which leads outside the "
                f"model's folder (to {str(file)!r}); expected a file beside the model"
            )
        if not file.is_file():
            raise BadInput(
                f"{where}: tensor {tensor.name!r} keeps its data in {location!r}, "
                "which does not exist beside the model"
            )
        end = info.get("offset", 0) + info.get("length", 0)
        if end > file.stat().st_size:
            raise BadInput(
                f"{where}: tensor {tensor.name!r} needs bytes up to {end} of {location!r}, which has "
                f"{file.stat().st_size}; the external data file is truncated"
            )


def _check_text_fields(model: onnx.ModelProto, where: str) -> None:
    """The model's and the graph's own text (names, doc strings, producer) is UTF-8: protobuf hands a
    field whose bytes are not back as bytes, which no later step can write out again (see check_names)."""
    for owner, message in (("model", model), ("graph", model.graph)):
        for field in ("name", "doc_string", "producer_name", "producer_version", "domain"):
            if field in message.DESCRIPTOR.fields_by_name and not isinstance(getattr(message, field), str):
                raise BadInput(f"{where}: the {owner}'s {field} is not UTF-8 text; expected text")


def check_names(graph: onnx.GraphProto, where: str) -> None:
    """Every name is text: protobuf hands a string field whose bytes are not UTF-8 back as bytes, which
    no later step can write out again."""
    named = [
        (f"node {i}", [n.name, n.op_type, n.domain, *n.input, *n.output]) for i, n in enumerate(graph.node)
    ]
    named += [("graph value", [v.name for v in (*graph.input, *graph.output, *graph.value_info)])]
    named += [("initializer", [t.name for t in graph.initializer])]
    for what, names in named:
        bad = next((name for name in names if not isinstance(name, str)), None)
        if bad is not None:
            raise BadInput(f"{where}: a name of {what}, {bad!r}, is not UTF-8 text; expected text names")
    for node in graph.node:
        for attribute in node.attribute:
            for sub in (attribute.g,) if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs:
                check_names(sub, where)


def all_tensors(graph: onnx.GraphProto):
    """Every tensor the graph holds: initializers and attribute tensors, subgraphs' included."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            kind = attribute.type  # (read once: most attributes are plain numbers, and are skipped)
            if kind == onnx.AttributeProto.TENSOR:
                yield attribute.t
            elif kind == onnx.AttributeProto.GRAPH:
                yield from all_tensors(attribute.g)
            elif kind == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from all_tensors(sub)


def external_files(model: onnx.ModelProto, base_dir: Path) -> set[Path]:
    """The files beside the model that its externally stored tensors name."""
    return {
        base_dir / entry.value
        for tensor in all_tensors(model.graph)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
        for entry in tensor.external_data
        if entry.key == "location"
    }
