"""What a runtime costs per call before it does any work: one tiny op, synchronized.

A model's start-to-finish time cannot fall below its runtime's floor on the same machine, so the
benchmark measures the floors in the same run: they say how much of a result is the model and how
much is the host (the CPU's speed and the runtime's per-call bookkeeping)."""

from __future__ import annotations

import torch
from onnx import TensorProto, helper

from .ort_cuda import ort_cuda_callable
from .timing import start_to_finish_us


def one_relu_model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "floor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def measure_floors(*, iters: int = 200, warmup: int = 20) -> dict[str, float | str]:
    """Start-to-finish µs of one ReLU on four floats in each runtime (or why it could not run)."""
    x = torch.randn(4, device="cuda")
    calls = {
        "synchronize only": lambda: None,
        "torch: one relu": lambda: torch.relu(x),
    }
    model = one_relu_model()
    for label, cuda_graph in (("ORT CUDA EP: one Relu", False), ("ORT CUDA EP + CUDA graph: one Relu", True)):
        try:
            calls[label] = ort_cuda_callable(model, {"x": x}, cuda_graph=cuda_graph, with_library=False)
        except Exception as error:  # (no onnxruntime-gpu here: the floor is not known, the rest runs)
            calls[label] = str(error).splitlines()[0] if str(error) else type(error).__name__
    floors: dict[str, float | str] = {}
    for label, call in calls.items():
        floors[label] = (
            call if isinstance(call, str) else round(start_to_finish_us(call, warmup=warmup, iters=iters), 1)
        )
    return floors
