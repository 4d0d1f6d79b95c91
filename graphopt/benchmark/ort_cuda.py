"""ONNX Runtime's CUDA execution provider, reading and writing torch's CUDA tensors in place (IO binding),
with or without CUDA graphs, with or without graphopt's op library."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import torch

_NUMPY = {torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64, torch.int32: np.int32}


def ort_cuda_callable(
    model: onnx.ModelProto,
    inputs: dict[str, torch.Tensor],
    *,
    cuda_graph: bool,
    with_library: bool,
    rotate: list[dict[str, torch.Tensor]] | None = None,
    sync_in_ort: bool = True,
) -> Callable[[], torch.Tensor | list[torch.Tensor]]:
    """A call that runs the model once. ``rotate``: more input sets, bound in turn on successive calls,
    so a small model's inputs are not served from L2 (not with CUDA graphs, which fix addresses).
    ``sync_in_ort=False`` leaves the end-of-run synchronization to the caller."""
    from graphopt.dependencies import require

    ort = require("onnxruntime", "timing ONNX Runtime's CUDA execution provider")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if with_library:
        from graphopt.ort import library_path

        options.register_custom_ops_library(library_path())
    provider = ("CUDAExecutionProvider", {"device_id": "0", "enable_cuda_graph": "1" if cuda_graph else "0"})
    session = ort.InferenceSession(model.SerializeToString(), options, providers=[provider])
    if "CUDAExecutionProvider" not in session.get_providers():
        raise RuntimeError("onnxruntime has no CUDA execution provider here (install onnxruntime-gpu)")
    outputs = _output_buffers(model, inputs)
    binding = session.io_binding()
    for name, tensor in inputs.items():
        binding.bind_input(name, "cuda", 0, _NUMPY[tensor.dtype], list(tensor.shape), tensor.data_ptr())
    for meta, tensor in zip(session.get_outputs(), outputs, strict=True):
        binding.bind_output(meta.name, "cuda", 0, _NUMPY[tensor.dtype], list(tensor.shape), tensor.data_ptr())

    sets = [inputs, *(rotate or [])]
    turn = [0]
    run_options = ort.RunOptions()
    if not sync_in_ort:
        run_options.add_run_config_entry("disable_synchronize_execution_providers", "1")

    def call():
        if len(sets) > 1:
            turn[0] = (turn[0] + 1) % len(sets)
            for name, tensor in sets[turn[0]].items():
                binding.bind_input(
                    name, "cuda", 0, _NUMPY[tensor.dtype], list(tensor.shape), tensor.data_ptr()
                )
        session.run_with_iobinding(binding, run_options)
        return outputs[0] if len(outputs) == 1 else outputs

    call.session = session
    return call


def _output_buffers(model: onnx.ModelProto, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Output tensors of the right shapes: from the model's declared types when static, else from one
    run on the CPU (a CUDA-graph session must not run before its buffers are bound)."""
    device = next(iter(inputs.values())).device
    shapes = []
    for output in model.graph.output:
        dims = output.type.tensor_type.shape.dim
        if not dims or not all(d.HasField("dim_value") for d in dims):
            break
        dtype = torch.from_numpy(
            np.zeros(0, onnx.helper.tensor_dtype_to_np_dtype(output.type.tensor_type.elem_type))
        ).dtype
        shapes.append(([d.dim_value for d in dims], dtype))
    else:
        return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in shapes]
    from graphopt.runtime.runners import onnx_session

    feeds = {name: t.detach().cpu().numpy() for name, t in inputs.items()}
    results = onnx_session(model).run(None, feeds)
    return [torch.empty(r.shape, dtype=torch.from_numpy(np.asarray(r)).dtype, device=device) for r in results]
