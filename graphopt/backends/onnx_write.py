"""Writing an ONNX model atomically, streaming external weights instead of holding them twice.

Weights that the input kept in an external file are copied from that file, chunk by chunk, into the
output's own data file (``model.opt.onnx.data`` beside ``model.opt.onnx``); weights held in memory are
written there too once the model is large. Both files are written under temporary names and renamed
into place at the end, so a failure never leaves a half-written model or touches the input.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

import numpy as np
import onnx

from ..files.atomic import temp_beside

# Tensors smaller than this stay inside the protobuf, as onnx.save does.
EXTERNAL_THRESHOLD = 1024
# Protobuf cannot serialize 2 GiB; leave room for the graph itself.
EMBED_LIMIT = 1_800_000_000
CHUNK = 64 << 20
ALIGN = 64


def needs_external_data(model: onnx.ModelProto) -> bool:
    total = 0
    for tensor in _initializers(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return True
        total += len(tensor.raw_data)
    return total > EMBED_LIMIT or any(True for _ in _external_constants(model.graph))


def save_onnx(
    model: onnx.ModelProto, path: str | os.PathLike, *, source_dir: str | os.PathLike | None
) -> Path:
    """Writes ``model`` to ``path`` (atomically). ``source_dir`` resolves the input's external data."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    external = needs_external_data(model)
    data_name = f"{path.name}.data"
    temporaries: list[Path] = []
    try:
        if external:
            data_tmp = temp_beside(path.parent / data_name)
            temporaries.append(data_tmp)
            model = _externalize(model, data_tmp, data_name, Path(source_dir) if source_dir else None)
        model_tmp = temp_beside(path)
        temporaries.append(model_tmp)
        with open(model_tmp, "wb") as out:
            out.write(model.SerializeToString())
            out.flush()
            os.fsync(out.fileno())
        if external:
            os.replace(temporaries[0], path.parent / data_name)
        os.replace(model_tmp, path)
        temporaries.clear()
    finally:
        for leftover in temporaries:
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return path


def _externalize(
    model: onnx.ModelProto, data_path: Path, location: str, source_dir: Path | None
) -> onnx.ModelProto:
    """A copy of ``model`` whose large tensors live in ``data_path`` (written here)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    with open(data_path, "wb") as data:
        for tensor in itertools.chain(_initializers(copy.graph), _external_constants(copy.graph)):
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                offset = _pad(data)
                length = _copy_external(tensor, data, source_dir)
            elif len(tensor.raw_data) >= EXTERNAL_THRESHOLD or _typed_size(tensor) >= EXTERNAL_THRESHOLD:
                raw = tensor.raw_data or onnx.numpy_helper.to_array(tensor).tobytes()
                offset = _pad(data)
                data.write(raw)
                length = len(raw)
                _clear_data(tensor)
            else:
                continue
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
        data.flush()
        os.fsync(data.fileno())
    return copy


def _copy_external(tensor: onnx.TensorProto, out, source_dir: Path | None) -> int:
    info = {entry.key: entry.value for entry in tensor.external_data}
    if source_dir is None:
        raise ValueError(f"tensor {tensor.name!r} is stored externally but the source directory is unknown")
    offset = int(info.get("offset", 0))
    length = (
        int(info["length"]) if "length" in info else (source_dir / info["location"]).stat().st_size - offset
    )
    with open(source_dir / info["location"], "rb") as source:
        source.seek(offset)
        remaining = length
        while remaining:
            chunk = source.read(min(CHUNK, remaining))
            if not chunk:
                raise ValueError(f"external data of {tensor.name!r} ends early")
            out.write(chunk)
            remaining -= len(chunk)
    return length


def _pad(out) -> int:
    position = out.tell()
    padding = -position % ALIGN
    out.write(b"\0" * padding)
    return position + padding


def _typed_size(tensor: onnx.TensorProto) -> int:
    if tensor.data_type == onnx.TensorProto.STRING:
        return 0
    return (
        int(np.prod(tensor.dims, dtype=np.int64))
        * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    )


def _clear_data(tensor: onnx.TensorProto) -> None:
    for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        tensor.ClearField(field)


def _initializers(graph: onnx.GraphProto):
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            kind = attribute.type
            if kind == onnx.AttributeProto.GRAPH:
                yield from _initializers(attribute.g)
            elif kind == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from _initializers(sub)


def _external_constants(graph: onnx.GraphProto):
    """Tensors of Constant nodes kept in an external file: copied into the output's data file like
    external initializers (other attribute tensors stay inside the protobuf)."""
    for node in graph.node:
        op_type = node.op_type  # (read once: a protobuf field read costs, and most nodes are neither)
        if op_type == "Constant":
            for attribute in node.attribute:
                kind = attribute.type
                if (
                    kind == onnx.AttributeProto.TENSOR
                    and attribute.t.data_location == onnx.TensorProto.EXTERNAL
                ):
                    yield attribute.t
        elif op_type in _WITH_SUBGRAPHS:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    yield from _external_constants(attribute.g)
                elif attribute.type == onnx.AttributeProto.GRAPHS:
                    for sub in attribute.graphs:
                        yield from _external_constants(sub)


_WITH_SUBGRAPHS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_EXTERNAL = onnx.TensorProto.EXTERNAL
