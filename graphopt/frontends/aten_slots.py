"""Convolutions and batch norms: carried verbatim, but read so that a pass can fold one into the other.

Their IR nodes keep a slot for each optional tensor argument even when the call passes None (a conv
without bias, a batch norm without affine weights), so input ``i`` is always argument ``i``:
``(x, weight, bias)`` for a convolution, ``(x, weight, bias, running_mean, running_var)`` for a batch
norm. A pass can then give a bias-less conv a bias by filling its slot, and the backend writes the call
with the new argument in place of the None. The scalar arguments passes need become attributes:
``transposed`` for a convolution, ``training`` and ``eps`` for a batch norm.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import fx

from ..ir import Node
from .fx_source import FxCall, Ref

aten = torch.ops.aten

# target -> (index of the ``transposed`` argument, or None where the op is never transposed)
_CONVOLUTIONS: dict[Any, int | None] = {
    **dict.fromkeys(
        (
            aten.conv1d.default,
            aten.conv2d.default,
            aten.conv3d.default,
            aten.conv1d.padding,
            aten.conv2d.padding,
            aten.conv3d.padding,
        ),
        None,
    ),
    aten.convolution.default: 6,
    aten._convolution.default: 6,
}

# target -> (index of the ``training`` argument, or None where it is inference only; index of eps)
_BATCH_NORMS: dict[Any, tuple[int | None, int]] = {
    aten._native_batch_norm_legit_no_training.default: (None, 6),
    aten._batch_norm_no_update.default: (None, 6),
    aten.batch_norm.default: (5, 7),
    aten.native_batch_norm.default: (5, 7),
    aten.cudnn_batch_norm.default: (5, 7),
    aten.miopen_batch_norm.default: (5, 7),
}

EMPTY = object()  # stands for an absent optional tensor that keeps its input slot


def keeps_slots(target: Any) -> bool:
    return target in _CONVOLUTIONS or target in _BATCH_NORMS


def with_slots(node: fx.Node, target: Any) -> tuple[tuple, dict]:
    """The call's arguments with EMPTY for each optional tensor argument given as None, or left out
    (torch.export drops trailing defaults: a 1x1 conv without bias is ``conv2d(x, w)``)."""
    args = list(node.args)
    arguments = target._schema.arguments
    last = max((i for i, a in enumerate(arguments) if _optional_tensor(a.type)), default=-1)
    while len(args) <= last and arguments[len(args)].name not in node.kwargs:
        args.append(arguments[len(args)].default_value)
    for i, argument in enumerate(arguments[: len(args)]):
        if args[i] is None and _optional_tensor(argument.type):
            args[i] = EMPTY
    return tuple(args), dict(node.kwargs)


class SlottedCall(FxCall):
    """A call whose trailing arguments the frontend added (slots for left-out optional tensors): written
    without them while every one is still empty, so a program no pass changed is written as it was."""

    def __init__(self, call: FxCall, given: int, member: Node):
        super().__init__(**{f.name: getattr(call, f.name) for f in dataclasses.fields(FxCall)})
        self.given = given
        self.member = member

    @property
    def args(self) -> tuple:
        added = self._args[self.given :]
        if all(not isinstance(a, Ref) or self.member.input(a.input) is None for a in added):
            return self._args[: self.given]
        return self._args

    @args.setter
    def args(self, args: tuple) -> None:
        self._args = tuple(args)


def slot_attributes(node: fx.Node, target: Any) -> dict[str, Any]:
    """``transposed`` of a convolution, ``training`` and ``eps`` of a batch norm (when they are plain
    Python values: a symbolic flag leaves them out, and then no pass folds the node)."""
    if target in _CONVOLUTIONS:
        index = _CONVOLUTIONS[target]
        transposed = False if index is None else _argument(node, target, index)
        return {"transposed": transposed} if type(transposed) is bool else {}
    training_index, eps_index = _BATCH_NORMS[target]
    training = False if training_index is None else _argument(node, target, training_index)
    eps = _argument(node, target, eps_index)
    if type(training) is not bool or type(eps) not in (int, float):
        return {}
    return {"training": training, "eps": float(eps)}


def _argument(node: fx.Node, target: Any, index: int) -> Any:
    argument = target._schema.arguments[index]
    if index < len(node.args):
        return node.args[index]
    if argument.name in node.kwargs:
        return node.kwargs[argument.name]
    return argument.default_value if argument.has_default_value() else None


def _optional_tensor(kind: Any) -> bool:
    return isinstance(kind, torch.OptionalType) and isinstance(kind.getElementType(), torch.TensorType)
