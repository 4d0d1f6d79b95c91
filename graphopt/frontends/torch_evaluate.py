"""Evaluating nodes of a torch program on constant inputs (constant folding), with torch itself.

One node: canonical ops go to graphopt's own NumPy evaluator (graphopt/analysis/evaluate.py); a
verbatim aten call runs its own op on CPU tensors. Random ops, in-place ops, higher-order ops and calls
returning non-tensors are never folded.

A region of nodes (a tensor the program makes fresh, the views of it and the in-place writes to them):
the program's own aten calls, replayed in order on CPU tensors, so that each write lands where it does
in the program. Only aten calls are run, never code from the file.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.fx.node import map_aggregate

from ..analysis.evaluate import can_evaluate, evaluate
from ..ir import DType, Node, Value, is_canonical
from .fx_source import Attr, FxCall, FxGroup, Ref
from .torch_arrays import to_numpy, to_torch

_aten = torch.ops.aten
# Calls that read their first argument's dtype (and device), never its values or shape: ``x.new_zeros``
# makes the same zeros whatever x holds, so x need not be a constant.
_READS_DTYPE_ONLY = frozenset({_aten.new_zeros.default, _aten.new_ones.default, _aten.new_full.default})
# Calls whose result is memory nobody has written yet: no constant, even where writes fill it later
# (a write that misses an element would fold whatever that memory held).
_UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty"})


def evaluate_torch_node(node: Node, arrays: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if is_canonical(node.op) and can_evaluate(node):
        return evaluate(node, [a for a in arrays if a is not None])
    group = node.source
    if not isinstance(group, FxGroup) or len(group.calls) != 1 or len(group.members) != 1:
        return None
    call = group.calls[0]
    target = call.target
    if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
        return None
    if torch.Tag.nondeterministic_seeded in target.tags:
        return None
    tensors = [None if a is None else to_torch(a) for a in arrays]
    readable = True

    def resolve(a):
        nonlocal readable
        if isinstance(a, Attr):
            readable = False
        return tensors[a.input] if isinstance(a, Ref) else a

    args, kwargs = map_aggregate((call.args, call.kwargs), resolve)
    if not readable:
        return None
    with torch.no_grad():
        result = target(*args, **kwargs)
    arrays_out = []
    for produced in group.produced[0]:
        value = result if produced is None or produced[1] is None else result[produced[1]]
        if not isinstance(value, torch.Tensor) or DType.from_torch(value.dtype) is None:
            return None
        arrays_out.append(to_numpy(value))
    return arrays_out


def dtype_only_inputs(node: Node) -> frozenset[int]:
    """The inputs of ``node`` whose values (and shape) its call never reads, only their dtype and device:
    ``x`` in ``x.new_zeros(size)``. Such an input need not be a constant for the node to be one."""
    group = node.source
    if not isinstance(group, FxGroup) or len(group.calls) != 1 or len(group.members) != 1:
        return frozenset()
    call = group.calls[0]
    reads_dtype_only = call.target in _READS_DTYPE_ONLY and call.args[:1] == (Ref(0, 0),)
    return frozenset({0}) if reads_dtype_only else frozenset()


def evaluate_torch_region(
    nodes: list[Node], inputs: dict[Value, np.ndarray], wanted: list[Value]
) -> list[np.ndarray] | None:
    """Runs ``nodes``, in order, as the program's own aten calls on CPU tensors, so that a write through
    a view lands in the tensor it views, as in the program: what folding a tensor that the program
    makes fresh and then fills in place needs (``mask = x.new_zeros(8, 8)``, ``mask[:4, 4:] = 1``...).
    ``inputs``: an array for every value the nodes read from outside them. Returns the arrays of
    ``wanted`` as they are after the last call, or None where a call is not one the program had
    verbatim, is random or returns uninitialized memory, or writes or aliases an argument other than
    its first."""
    env = {value: to_torch(array) for value, array in inputs.items()}
    for node in nodes:
        call = _region_call(node)
        if call is None:
            return None
        missing = False

        def resolve(a, node=node):
            nonlocal missing
            if isinstance(a, Attr):
                missing = True
            if not isinstance(a, Ref):
                return a
            value = node.input(a.input)
            missing = missing or value not in env
            return env.get(value)

        args, kwargs = map_aggregate((call.args, call.kwargs), resolve)
        if missing:
            return None
        with torch.no_grad():
            result = call.target(*args, **kwargs)
        for value, produced in zip(node.outputs, node.source.produced[0], strict=True):
            item = result if produced is None or produced[1] is None else result[produced[1]]
            if not isinstance(item, torch.Tensor):
                return None
            env[value] = item
    arrays = []
    for value in wanted:
        tensor = env[value]
        if DType.from_torch(tensor.dtype) != value.dtype or tuple(tensor.shape) != value.shape:
            return None  # (not the value the IR describes: no constant to stand for it)
        arrays.append(to_numpy(tensor))
    return arrays


def _region_call(node: Node) -> FxCall | None:
    """The one aten call ``node`` stands for, as the program has it, where replaying it is safe: it
    is not random, its result is not uninitialized memory, and it writes or aliases (returns a view
    of) at most its first argument, which is the node's first input, as the pass that found the
    region assumed; and it writes in place exactly when the IR says it does."""
    group = node.source
    if not isinstance(group, FxGroup) or len(group.calls) != 1 or len(group.members) != 1:
        return None
    if not group.intact(node.graph):
        return None
    call = group.calls[0]
    target = call.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    if {torch.Tag.nondeterministic_seeded, torch.Tag.inplace_view} & set(target.tags):
        return None
    if target._opname in _UNINITIALIZED or bool(node.meta.get("mutates")) != target._schema.is_mutable:
        return None
    touched = [i for i, a in enumerate(target._schema.arguments) if a.alias_info is not None]
    if touched and (touched != [0] or call.args[:1] != (Ref(0, 0),)):
        return None
    return call
