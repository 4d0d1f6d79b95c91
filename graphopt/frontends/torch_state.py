"""The state a torch.export program writes: buffers it updates in place or returns as mutations.

Such a buffer is state, not a constant: nothing may be folded from its value, the optimized program
gets its own copy of it, and a run for the numeric check runs on copies, so that neither the caller's
program nor the optimized one changes under the check.
"""

from __future__ import annotations

import torch
from torch import fx
from torch.export.graph_signature import OutputKind


def mutated_targets(program: torch.export.ExportedProgram) -> set[str]:
    """Targets of the parameters and buffers the program writes: mutations it returns (functional
    form) and in-place writes to a placeholder or to a view of one (as exported, before decomposition)."""
    signature = program.graph_signature
    targets = {
        spec.target
        for spec in signature.output_specs
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION) and spec.target
    }
    by_placeholder = {s.arg.name: s.target for s in signature.input_specs if getattr(s, "target", None)}
    roots: dict[fx.Node, str] = {}  # a node aliasing a placeholder's tensor -> that placeholder's name
    for node in program.graph_module.graph.nodes:
        if node.op == "placeholder":
            roots[node] = node.name
            continue
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        for position, argument in enumerate(schema.arguments):
            value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
            if not isinstance(value, fx.Node) or value not in roots or argument.alias_info is None:
                continue
            if argument.alias_info.is_write:
                target = by_placeholder.get(roots[value])
                if target is not None:
                    targets.add(target)
            if schema.returns and schema.returns[0].alias_info is not None:
                roots[node] = roots[value]  # a view (or the in-place op's own result) of the same tensor
    return targets


def detached_state(program: torch.export.ExportedProgram, tensors: dict[str, torch.Tensor]) -> dict:
    """``tensors`` (a state dict or the constants) with each written buffer replaced by a copy."""
    written = mutated_targets(program)
    return {name: _copy(t) if name in written else t for name, t in tensors.items()}


def runnable_module(program: torch.export.ExportedProgram) -> torch.nn.Module:
    """``program.module()`` whose written buffers are copies: running it leaves the program as it was."""
    module = program.module()
    for target in mutated_targets(program):
        owner, _, leaf = target.rpartition(".")
        holder = module.get_submodule(owner) if owner else module
        tensor = getattr(holder, leaf, None)
        if isinstance(tensor, torch.Tensor):
            setattr(holder, leaf, _copy(tensor))  # (nn.Module keeps a buffer a buffer, persistent or not)
    return module


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    copied = tensor.detach().clone()
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(copied, requires_grad=tensor.requires_grad)
    return copied
