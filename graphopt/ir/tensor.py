"""Constant tensors that are read only when a pass needs their values.

Weights of large models stay where they are (an external-data file, a protobuf held by the frontend)
until somebody asks for ``numpy()``; a backend that re-emits an untouched constant uses ``source``
and never materializes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .dtypes import DType


class Tensor:
    __slots__ = ("_array", "_loader", "dtype", "nbytes", "shape", "source")

    def __init__(
        self,
        dtype: DType,
        shape: tuple[int, ...],
        *,
        array: np.ndarray | None = None,
        loader: Callable[[], np.ndarray] | None = None,
        source: object = None,
    ):
        if (array is None) == (loader is None):
            raise ValueError("a Tensor needs exactly one of array or loader")
        self.dtype = dtype
        self.shape = tuple(map(int, shape))
        self.nbytes = math.prod(self.shape) * dtype.itemsize  # (np.prod costs microseconds per call)
        self._array = array
        self._loader = loader
        # What the frontend read this constant from (an onnx TensorProto, a torch tensor, ...), so a
        # backend can write an untouched constant back without converting it.
        self.source = source

    @classmethod
    def from_array(cls, array: np.ndarray | np.generic | float | int, dtype: DType | None = None) -> Tensor:
        array = np.asarray(array)
        dtype = dtype or DType.from_numpy(array.dtype)
        if dtype is None:
            raise TypeError(f"no graph dtype for NumPy dtype {array.dtype}")
        array = np.asarray(array, dtype=dtype.numpy, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        return cls(dtype, array.shape, array=array)

    @property
    def loaded(self) -> bool:
        return self._array is not None

    def numpy(self) -> np.ndarray:
        """The values, loaded on first use (and kept: callers ask only for small or needed tensors)."""
        if self._array is None:
            array = np.asarray(self._loader()).reshape(self.shape)
            self._array, self._loader = array, None
        return self._array

    def ints(self) -> tuple[int, ...]:
        """The values, flattened, as Python ints (a shape, sizes, axes)."""
        values = self.numpy().reshape(-1)
        if values.dtype.kind in "iu":
            return tuple(values.tolist())  # (the same ints, without an int() call per element)
        return tuple(int(v) for v in values)

    def scalar(self) -> float | int | None:
        """The single value of a one-element tensor, else None."""
        if math.prod(self.shape) != 1:
            return None
        return self.numpy().reshape(()).item()

    def __repr__(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        return f"Tensor({self.dtype}, {dims})"
