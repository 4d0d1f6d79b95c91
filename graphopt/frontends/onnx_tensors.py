"""ONNX tensors as IR tensors, read on first use (an external file's data memory-mapped)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import BadInput
from ..ir import DType, Tensor


def external_value(proto: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node that keeps it in an external file (checked by onnx_read like the
    initializers' files), or None."""
    if proto.op_type != "Constant" or proto.domain not in ("", "ai.onnx"):
        return None
    for attribute in proto.attribute:
        if attribute.name == "value" and attribute.type == onnx.AttributeProto.TENSOR:
            return attribute.t if attribute.t.data_location == onnx.TensorProto.EXTERNAL else None
    return None


def lazy_tensor(proto: onnx.TensorProto, base: Path | None) -> Tensor:
    dtype = DType.from_onnx(proto.data_type)
    if dtype is None:
        raise BadInput(
            f"initializer {proto.name!r} has element type {proto.data_type}, which graphopt does not know"
        )
    shape = tuple(proto.dims)
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        info = {entry.key: entry.value for entry in proto.external_data}
        if base is None:
            raise BadInput(
                f"tensor {proto.name!r} keeps its data in an external file; load the model from its path"
            )
        file, offset = base / info["location"], int(info.get("offset", 0))

        def load() -> np.ndarray:
            count = int(np.prod(shape, dtype=np.int64))
            return np.memmap(file, dtype=dtype.numpy, mode="r", offset=offset, shape=(count,))

        return Tensor(dtype, shape, loader=load, source=proto)
    return Tensor(dtype, shape, loader=lambda: numpy_helper.to_array(proto), source=proto)


def sparse_tensor(sparse: onnx.SparseTensorProto) -> Tensor:
    dtype = DType.from_onnx(sparse.values.data_type)
    return Tensor(dtype, tuple(sparse.dims), loader=lambda: numpy_helper.to_array(sparse), source=sparse)
