"""Short helpers over `onnx.helper` for the hand-built zoo models."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20
# ONNX Runtime 1.21 and newer read IR version 10; the newest onnx writes a higher one by default.
IR_VERSION = 10
FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

Dims = Sequence[int | str | None]


def tensor(name: str, dtype: int, shape: Dims | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model(
    graph: onnx.GraphProto,
    *,
    extra_opsets: dict[str, int] | None = None,
    functions: Sequence[onnx.FunctionProto] = (),
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", OPSET)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in (extra_opsets or {}).items()]
    built = helper.make_model(
        graph, opset_imports=opsets, functions=list(functions), producer_name="graphopt-zoo"
    )
    built.ir_version = IR_VERSION
    return built


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def floats(*shape: int, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(np.float32)
