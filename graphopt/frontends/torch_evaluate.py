"""Evaluating one node of a torch program on constant inputs (constant folding), with torch itself.

Canonical ops go to graphopt's own NumPy evaluator (graphopt/analysis/evaluate.py); a verbatim aten
call runs its own op on CPU tensors. Random ops, in-place ops, higher-order ops and calls returning
non-tensors are never folded.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.fx.node import map_aggregate

from ..analysis.evaluate import can_evaluate, evaluate
from ..ir import DType, Node, is_canonical
from .fx_source import Attr, FxGroup, Ref
from .torch_arrays import to_numpy, to_torch


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
