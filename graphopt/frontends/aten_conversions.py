"""Conversions a traced program writes (``x.to(dtype)``, ``x.to(device)``, ``x.float()``) and the
metadata checks beside them, read as what they did when traced.

A conversion to the device the value was traced on did nothing there but pin the program to that
device: exported on a CPU, ``x.to("cpu")`` (a mask built by a transformer, say) left in the graph makes
the program fail after ``module().cuda()``. Read as a cast to its dtype (none, if it keeps the dtype,
which ``drop_noop_casts`` then removes), the optimized program runs wherever its inputs and state are,
and computes on the traced device what the original computes. A conversion that moves a value to
another device, pins memory, or copies stays verbatim.
"""

from __future__ import annotations

from typing import Any

import torch

from ..ir import DType, Op
from .aten_members import Member, one, tensor_val

aten = torch.ops.aten


def _on_traced_device(value, device) -> bool:
    """``device`` (None: unchanged) is the one ``value`` was traced on; a device named without an index
    ("cuda") is the traced one of its type."""
    if device is None:
        return True
    val = tensor_val(value)
    if val is None:
        return False
    device = torch.device(device)
    return device.type == val.device.type and device.index in (None, val.device.index)


def _cast(value, dtype) -> list[Member] | None:
    val = tensor_val(value)
    to = DType.from_torch(dtype if dtype is not None else getattr(val, "dtype", None))
    return None if to is None else one(Op.CAST, [value], to=to)


def _plain(a, *flags: str) -> bool:
    """None of the named flags set, and a strided layout (or none given)."""
    return not any(a.get(flag) for flag in flags) and a.get("layout") in (None, torch.strided)


def _to_copy(node, a):
    if a.get("dtype") is None or not _plain(a, "non_blocking", "pin_memory", "memory_format"):
        return None
    return _cast(a["self"], a["dtype"]) if _on_traced_device(a["self"], a.get("device")) else None


def _to_dtype(node, a):
    """``x.to(dtype)``; to x's own dtype it returns x itself, a Cast that ``drop_noop_casts`` removes
    (its readers then read x, the very tensor they read before)."""
    if not _plain(a, "copy", "non_blocking", "memory_format"):
        return None
    return _cast(a["self"], a["dtype"])


def _to_device(node, a):
    """``x.to(device, dtype)``, ``x.to(dtype=..., layout=..., device=...)``: a cast where the device is
    the traced one."""
    if not _plain(a, "copy", "non_blocking", "memory_format", "pin_memory"):
        return None
    return _cast(a["self"], a.get("dtype")) if _on_traced_device(a["self"], a.get("device")) else None


def _assert_tensor_metadata(node, a):
    """The check that ``x.to(dtype)`` leaves in a traced program: x has the dtype, device and layout
    it had when traced. Where the dtype it asserts is x's traced dtype, it states nothing the IR's
    dtype of x does not, and its device and layout are those of the traced run (left in, they would
    only make the program fail after a ``.to(device)``): ``drop_metadata_asserts`` removes it. An
    assert of sizes or strides, or of another dtype, stays verbatim."""
    val = tensor_val(a["a"])
    if val is None or a["size"] is not None or a["stride"] is not None:
        return None
    dtype = a["dtype"]
    if dtype is None or dtype != val.dtype or DType.from_torch(dtype) is None:
        return None
    return [Member(Op.ASSERT_METADATA, [a["a"]], {"dtype": DType.from_torch(dtype)}, results=[])]


CONVERSIONS: dict[Any, Any] = {
    aten._to_copy.default: _to_copy,
    aten.to.dtype: _to_dtype,
    aten.to.device: _to_device,
    aten.to.dtype_layout: _to_device,
    aten._assert_tensor_metadata.default: _assert_tensor_metadata,
}
