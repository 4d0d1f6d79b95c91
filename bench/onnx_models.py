"""Benchmark models written directly as ONNX (exporting hundreds of slices through torch takes minutes)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bench", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


def split_stack(n: int, b: int, d: int, weight: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    """The seed's split_stack as torch.onnx.export(dynamo=True) writes it: Split, N × (Reshape,
    LayerNormalization, Tanh, Unsqueeze), Concat, MatMul, Add, Relu. ``weight`` is nn.Linear's [1, D]."""
    inits = [
        numpy_helper.from_array(np.asarray([b, d], np.int64), "view_shape"),
        numpy_helper.from_array(np.ones(d, np.float32), "ones"),
        numpy_helper.from_array(np.asarray([0], np.int64), "axis0"),
        numpy_helper.from_array(np.ascontiguousarray(weight.T.astype(np.float32)), "weight_t"),
        numpy_helper.from_array(bias.astype(np.float32), "bias"),
    ]
    pieces = [f"piece{i}" for i in range(n)]
    nodes = [helper.make_node("Split", ["x"], pieces, axis=0, num_outputs=n)]
    for i, piece in enumerate(pieces):
        nodes += [
            helper.make_node("Reshape", [piece, "view_shape"], [f"view{i}"]),
            helper.make_node("LayerNormalization", [f"view{i}", "ones"], [f"norm{i}"], axis=-1, epsilon=0.0),
            helper.make_node("Tanh", [f"norm{i}"], [f"tanh{i}"]),
            helper.make_node("Unsqueeze", [f"tanh{i}", "axis0"], [f"unsq{i}"]),
        ]
    nodes += [
        helper.make_node("Concat", [f"unsq{i}" for i in range(n)], ["stacked"], axis=0),
        helper.make_node("MatMul", ["stacked", "weight_t"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["linear"]),
        helper.make_node("Relu", ["linear"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n * b * d])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, b, 1])
    return _model(nodes, [x], [y], inits)


def norm_act(rows: int, d: int, activation: str, elem_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """LayerNormalization (affine) followed by an activation, as ONNX Runtime's own ops."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal(d).astype(dtype), "scale"),
        numpy_helper.from_array(rng.standard_normal(d).astype(dtype), "bias"),
    ]
    act = (
        helper.make_node("Gelu", ["h"], ["y"])
        if activation == "gelu"
        else helper.make_node("Tanh", ["h"], ["y"])
    )
    nodes = [
        helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["h"], axis=-1, epsilon=1e-5),
        act,
    ]
    x = helper.make_tensor_value_info("x", elem_type, [rows, d])
    y = helper.make_tensor_value_info("y", elem_type, [rows, d])
    return _model(nodes, [x], [y], inits)
