"""Shared helpers of the fused-op tests: tolerances, random inputs, ONNX Runtime sessions."""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

# Relative tolerance against the float64 reference, per storage dtype. The absolute tolerance is
# the same fraction of the reference's largest magnitude (at least 1), so values near zero are
# not judged relatively.
TOLERANCES = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
ACTIVATIONS = ("identity", "relu", "tanh", "gelu", "gelu_tanh", "silu", "sigmoid")
NORMS = ("layer", "rms")


def assert_close(actual, expected, dtype: str) -> None:
    tol = TOLERANCES[dtype]
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    atol = tol * max(1.0, float(np.abs(expected).max(initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=atol)


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    """A plain ONNX Runtime CPU session: no graphopt library, so fallback functions run."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@functools.cache
def newest_ort_opset() -> int:
    """The newest default-domain opset this onnxruntime accepts (probed, newest first)."""
    for opset in range(onnx.defs.onnx_opset_version(), 13, -1):
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "probe",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        try:
            session(model)
        except Exception:
            continue
        return opset
    raise AssertionError("onnxruntime accepts no opset newer than 13")


class ThroughAutogradFormula:
    """A pass-through dispatch mode: under it a fused op's eager call cannot take the direct path
    (``torch_direct``), so gradients come from the op's registered autograd formula, as under
    torch.compile, rather than from the native ops the direct path runs."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        class PassThrough(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        self._mode = PassThrough()
        return self._mode.__enter__()

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


GRADIENT_PATHS = {"native_ops": contextlib.nullcontext, "autograd_formula": ThroughAutogradFormula}


class _PythonKernelOps:
    def __getattr__(self, name):
        import torch

        from graphopt.fused import register_torch_ops, torch_native

        if name in torch_native.active_ops():
            return getattr(torch.ops.graphopt_eager, name)
        return getattr(register_torch_ops(), name)


def python_kernel_ops():
    """graphopt's torch ops as their Python kernels run them (launch plans, torch_direct): the ops
    themselves, or, for an op whose eager CUDA calls the C++ kernels took in this process
    (torch_native, switched on by the first such call), its copy in graphopt_eager, which keeps the
    Python kernels. Tests of the Python path stay right whatever ran before them."""
    return _PythonKernelOps()
