"""The vocabulary of aten translations: the IR nodes ("members") a call becomes, and readers of FX values.

Axes are made non-negative while reading, so canonicalization has nothing to redo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from ..ir import DType

INTERNAL = "internal"  # a member output the group itself consumes


@dataclass(frozen=True)
class Internal:
    """An input that reads output ``output`` of an earlier member of the same call."""

    member: int
    output: int


@dataclass(frozen=True)
class Scalar:
    """A Python number argument; the frontend makes it a 0-d graph constant of ``dtype``."""

    value: float | int
    dtype: DType


@dataclass
class Member:
    op: str
    inputs: list  # fx.Node | Internal | Scalar | None
    attrs: dict[str, Any] = field(default_factory=dict)
    # per output: the index of the call's result element it is (None: the call's value itself),
    # or INTERNAL
    results: list[int | str | None] = field(default_factory=lambda: [None])


def bind(node: fx.Node, target: Any = None) -> dict[str, Any]:
    """The call's arguments by the schema names of ``target`` (by default the call's own op), defaults
    filled in."""
    bound = {}
    for i, argument in enumerate((node.target if target is None else target)._schema.arguments):
        if i < len(node.args) and not argument.kwarg_only:
            bound[argument.name] = node.args[i]
        elif argument.name in node.kwargs:
            bound[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
    return bound


# ----- reading FX values -----------------------------------------------------------------------


def tensor_val(value: Any) -> torch.Tensor | None:
    val = value.meta.get("val") if isinstance(value, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def dtype_of(value: Any) -> DType | None:
    val = tensor_val(value)
    return None if val is None else DType.from_torch(val.dtype)


def rank_of(value: Any) -> int | None:
    val = tensor_val(value)
    return None if val is None else val.dim()


def static_dims(val: torch.Tensor) -> tuple[int, ...] | None:
    dims = tuple(val.shape)
    return dims if all(type(d) is int for d in dims) else None


def ints(values) -> tuple[int, ...] | None:
    """A list argument of plain ints (not SymInt nodes), or None."""
    if not isinstance(values, list | tuple) or not all(type(v) is int for v in values):
        return None
    return tuple(values)


def axis_of(axis: Any, rank: int | None) -> int | None:
    if type(axis) is not int or rank is None or not -rank <= axis < max(rank, 1):
        return None
    return axis % rank if rank else 0


def axes_of(axes: Any, rank: int | None) -> tuple[int, ...] | None:
    listed = ints(axes)
    if listed is None or rank is None:
        return None
    fixed = [axis_of(a, rank) for a in listed]
    return None if None in fixed else tuple(sorted(set(fixed)))


def is_node(value: Any) -> bool:
    return isinstance(value, fx.Node)


def one(op: str, inputs: list, **attrs: Any) -> list[Member]:
    return [Member(op, inputs, attrs)]
