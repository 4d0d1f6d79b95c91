"""Calling optimized torch programs cheaply.

``ExportedProgram.module()`` flattens and checks its inputs on every call (tens of microseconds); for a
graph that is one view and one fused kernel, that is most of the time. ``direct_callable`` binds the
lifted weights once and calls the graph module itself; ``cuda_graphed`` goes further and replays a
captured CUDA graph, so a call costs one graph launch (plus a copy when the caller's input is not the
captured buffer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.export.graph_signature import InputKind


def direct_callable(program: torch.export.ExportedProgram) -> Callable[..., Any]:
    """A function of the program's user inputs (positional, flat) that calls its graph module directly.

    The program's weights must already be on the device the inputs will be on.
    """
    graph_module = program.graph_module
    bound: list[torch.Tensor | None] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            bound.append(None)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = program.state_dict.get(spec.target)
            bound.append(tensor if tensor is not None else program.constants[spec.target])
        else:
            bound.append(program.constants[spec.target])
    slots = [i for i, value in enumerate(bound) if value is None]
    outputs = len(program.graph_signature.output_specs)

    def call(*inputs: torch.Tensor):
        args = list(bound)
        for slot, value in zip(slots, inputs, strict=True):
            args[slot] = value
        result = graph_module(*args)
        return result[0] if outputs == 1 else result

    return call


def to_device(program: torch.export.ExportedProgram, device: str) -> torch.export.ExportedProgram:
    from torch.export.passes import move_to_device_pass

    return move_to_device_pass(program, device)


def cuda_graphed(
    function: Callable[..., Any], example_inputs: Sequence[torch.Tensor], *, capture_inputs: bool = False
) -> Callable[..., Any]:
    """``function`` captured in a CUDA graph; calls replay it.

    By default the graph reads copies of ``example_inputs`` and each call copies its arguments in.
    With ``capture_inputs`` it reads ``example_inputs`` themselves: a caller that refills those tensors
    in place (a serving loop with fixed input buffers) then pays no copy at all.
    """
    static_inputs = list(example_inputs) if capture_inputs else [t.clone() for t in example_inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm up (autotuning, lazy initialization) outside the capture
            function(*static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = function(*static_inputs)

    def call(*inputs: torch.Tensor):
        for static, value in zip(static_inputs, inputs, strict=True):
            if value.data_ptr() != static.data_ptr():
                static.copy_(value)
        graph.replay()
        return static_output

    call.static_inputs = static_inputs
    return call
