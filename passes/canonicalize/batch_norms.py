"""The inference batch norms passes fold or fuse: aten's (torch.export) and ONNX ``BatchNormalization``,
and the per-channel affine map each computes in inference."""

from __future__ import annotations

import numpy as np
from onnx import helper

from graphopt.ir import Node, constant_of, opaque_name
from graphopt.rewrite import Fail

BATCH_NORMS = frozenset(
    opaque_name("aten", name)
    for name in (
        "_native_batch_norm_legit_no_training.default",
        "_batch_norm_no_update.default",
        "batch_norm.default",
        "native_batch_norm.default",
        "cudnn_batch_norm.default",
        "miopen_batch_norm.default",
    )
)
ONNX_BATCH_NORM = opaque_name("onnx", "BatchNormalization")
ALL_BATCH_NORMS = (*BATCH_NORMS, ONNX_BATCH_NORM)
ONNX_DEFAULT_EPSILON = 1e-5


def inference_epsilon(norm: Node) -> float | Fail:
    """The batch norm's epsilon, or why it is not known to be an inference batch norm."""
    if norm.op == ONNX_BATCH_NORM:
        attrs = {a.name: helper.get_attribute_value(a) for a in norm.source.attribute}
        if attrs.get("training_mode", 0) != 0 or attrs.get("is_test", 1) == 0:
            return Fail(f"{norm.name!r} is in training mode")
        return float(attrs.get("epsilon", ONNX_DEFAULT_EPSILON))
    if norm.attrs.get("training") is not False or "eps" not in norm.attrs:
        return Fail(f"{norm.name!r} is not known to be in inference mode")
    return float(norm.attrs["eps"])


def batch_norm_affine(norm: Node) -> tuple[np.ndarray, np.ndarray] | Fail:
    """The batch norm's per-channel ``(s, beta - mean * s)`` in float64, or why they are not constant."""
    eps = inference_epsilon(norm)
    if isinstance(eps, Fail):
        return eps
    if any(norm.graph.is_used(v) for v in norm.outputs[1:]):
        return Fail(f"{norm.name!r}'s saved statistics are read")
    x = norm.input(0)
    if x is None or x.rank is None or x.rank < 2 or not isinstance(x.shape[1], int):
        return Fail(f"the channel count of {norm.name!r}'s input is unknown")
    channels = x.shape[1]
    arrays = []
    for value, default in zip(norm.inputs[1:5], (1.0, 0.0, None, None), strict=False):
        if value is None and default is not None:
            arrays.append(np.full(channels, default))
            continue
        tensor = constant_of(value) if value is not None else None
        if tensor is None or tensor.shape != (channels,):
            name = "absent" if value is None else repr(value.name)
            return Fail(f"{norm.name!r} reads {name}, not a constant of {channels} channels")
        arrays.append(tensor.numpy().astype(np.float64))
    if len(arrays) != 4:
        return Fail(f"{norm.name!r} does not read gamma, beta, mean and variance")
    gamma, beta, mean, var = arrays
    scale = gamma / np.sqrt(var + eps)
    return scale, beta - mean * scale
