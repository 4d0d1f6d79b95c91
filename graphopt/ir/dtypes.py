"""Element types, independent of any frontend, with their ONNX, NumPy and torch spellings."""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np
from onnx import TensorProto


class DType(enum.Enum):
    # value: (ONNX element type, NumPy dtype name, torch dtype attribute or None, bytes per element)
    FLOAT32 = (TensorProto.FLOAT, "float32", "float32", 4)
    FLOAT16 = (TensorProto.FLOAT16, "float16", "float16", 2)
    BFLOAT16 = (TensorProto.BFLOAT16, "bfloat16", "bfloat16", 2)  # NumPy through ml_dtypes
    FLOAT64 = (TensorProto.DOUBLE, "float64", "float64", 8)
    INT8 = (TensorProto.INT8, "int8", "int8", 1)
    INT16 = (TensorProto.INT16, "int16", "int16", 2)
    INT32 = (TensorProto.INT32, "int32", "int32", 4)
    INT64 = (TensorProto.INT64, "int64", "int64", 8)
    UINT8 = (TensorProto.UINT8, "uint8", "uint8", 1)
    UINT16 = (TensorProto.UINT16, "uint16", "uint16", 2)
    UINT32 = (TensorProto.UINT32, "uint32", "uint32", 4)
    UINT64 = (TensorProto.UINT64, "uint64", "uint64", 8)
    BOOL = (TensorProto.BOOL, "bool", "bool", 1)
    COMPLEX64 = (TensorProto.COMPLEX64, "complex64", "complex64", 8)
    COMPLEX128 = (TensorProto.COMPLEX128, "complex128", "complex128", 16)
    STRING = (TensorProto.STRING, "object", None, 0)

    def __init__(self, onnx_code: int, numpy_name: str, torch_name: str | None, itemsize: int):
        # Plain attributes: passes read these for every value, and an Enum's ``value`` is a
        # descriptor lookup each time.
        self.onnx = onnx_code
        self.itemsize = itemsize
        self.is_float = numpy_name in ("float32", "float16", "bfloat16", "float64")

    @property
    def numpy(self) -> np.dtype:
        if self is DType.BFLOAT16:
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.value[1])

    @property
    def torch(self):
        import torch

        return getattr(torch, self.value[2])

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    @staticmethod
    def from_onnx(code: int) -> DType | None:
        return _BY_ONNX.get(code)

    @staticmethod
    def from_numpy(dtype) -> DType | None:
        return _BY_NUMPY.get(np.dtype(dtype).name)

    @staticmethod
    def from_torch(dtype) -> DType | None:
        return _BY_TORCH.get(str(dtype).removeprefix("torch."))


for _member in DType:
    _member.text = _member.name.lower()  # (str() of a dtype is part of many keys and messages)
del _member

_BY_ONNX = {d.onnx: d for d in DType}
_BY_NUMPY = {d.value[1]: d for d in DType}
_BY_TORCH = {d.value[2]: d for d in DType if d.value[2] is not None}
