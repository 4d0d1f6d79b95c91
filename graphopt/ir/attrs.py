"""Attribute values as hashable keys (for comparing nodes: identical chains, common subexpressions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import Tensor

# Values that are hashable as they are (most attributes: axes, eps, names): no recursion for them.
_PLAIN = frozenset({int, float, str, bool, type(None)})


def frozen(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        if not value:
            return ()  # (most nodes have no attributes)
        return tuple(sorted((k, v if type(v) in _PLAIN else frozen(v)) for k, v in value.items()))
    if kind is tuple and all(type(v) in _PLAIN for v in value):
        return value
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, Tensor):
        return ("tensor", str(value.dtype), value.shape, value.numpy().tobytes())
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    return value
