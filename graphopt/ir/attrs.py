"""Attribute values as hashable keys (for comparing nodes: identical chains, common subexpressions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import Tensor


def frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, Tensor):
        return ("tensor", str(value.dtype), value.shape, value.numpy().tobytes())
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    return value
