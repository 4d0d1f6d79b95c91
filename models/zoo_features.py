"""Hand-built models exercising ModelProto features a lossless round trip must keep.

Model-local functions, metadata and doc strings, value_info, several outputs, an initializer that is also
a graph input, weights in an external data file, and operators from extra domains.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from models.onnx_build import FLOAT, OPSET, floats, init, model, tensor

FUNCTION_DOMAIN = "zoo.functions"


def _scaled_tanh() -> onnx.FunctionProto:
    """`Y = tanh(X) * alpha`, with `alpha` an attribute of the calling node."""
    alpha = helper.make_node("Constant", [], ["alpha_value"])
    alpha.attribute.append(
        onnx.AttributeProto(name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    )
    return helper.make_function(
        FUNCTION_DOMAIN,
        "ScaledTanh",
        ["X"],
        ["Y"],
        [alpha, helper.make_node("Tanh", ["X"], ["t"]), helper.make_node("Mul", ["t", "alpha_value"], ["Y"])],
        opset_imports=[helper.make_opsetid("", OPSET)],
        attributes=["alpha"],
        doc_string="tanh(X) * alpha",
    )


def _gated() -> onnx.FunctionProto:
    """`Y = X * ScaledTanh(X, alpha=1)`: a function that calls another function."""
    return helper.make_function(
        FUNCTION_DOMAIN,
        "TanhGate",
        ["X"],
        ["Y"],
        [
            helper.make_node("ScaledTanh", ["X"], ["g"], domain=FUNCTION_DOMAIN, alpha=1.0),
            helper.make_node("Mul", ["X", "g"], ["Y"]),
        ],
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(FUNCTION_DOMAIN, 1)],
    )


def local_functions() -> onnx.ModelProto:
    nodes = [
        helper.make_node("ScaledTanh", ["x"], ["a"], domain=FUNCTION_DOMAIN, alpha=2.0),
        helper.make_node("TanhGate", ["a"], ["y"], domain=FUNCTION_DOMAIN),
    ]
    graph = helper.make_graph(
        nodes, "local_functions", [tensor("x", FLOAT, [2, 4])], [tensor("y", FLOAT, [2, 4])]
    )
    return model(graph, extra_opsets={FUNCTION_DOMAIN: 1}, functions=[_scaled_tanh(), _gated()])


def local_functions_expected() -> list[np.ndarray]:
    a = np.tanh(floats(2, 4, seed=1)) * 2
    return [a * np.tanh(a)]


def metadata_and_docs() -> onnx.ModelProto:
    """Doc strings and metadata on the model, the graph, a node and a value."""
    relu = helper.make_node("Relu", ["x"], ["r"], doc_string="keeps the positive part")
    relu.metadata_props.add(key="origin", value="zoo")
    graph = helper.make_graph(
        [relu, helper.make_node("Neg", ["r"], ["y"], name="negate")],
        "metadata_and_docs",
        [tensor("x", FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 4], doc_string="minus relu(x)")],
        doc_string="a graph with documentation",
    )
    graph.metadata_props.add(key="stage", value="test")
    built = model(graph)
    built.doc_string = "a model with metadata"
    built.domain = "ai.graphopt.zoo"
    built.model_version = 7
    helper.set_model_props(built, {"author": "graphopt zoo", "license": "Apache-2.0"})
    return built


def value_info() -> onnx.ModelProto:
    """value_info for every intermediate, with a symbolic batch dimension."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["projected"]),
        helper.make_node("Add", ["projected", "b"], ["biased"]),
        helper.make_node("LayerNormalization", ["biased", "gamma"], ["normed"], axis=-1, epsilon=1e-5),
        helper.make_node("Tanh", ["normed"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "value_info",
        [tensor("x", FLOAT, ["batch", 8])],
        [tensor("y", FLOAT, ["batch", 4])],
        [
            init("w", floats(8, 4, seed=2)),
            init("b", floats(4, seed=3)),
            init("gamma", np.ones(4, np.float32)),
        ],
        value_info=[tensor(name, FLOAT, ["batch", 4]) for name in ("projected", "biased", "normed")],
    )
    return model(graph)


def multiple_outputs() -> onnx.ModelProto:
    """Split halves, a sum that is an output and also consumed, and a graph input passed through."""
    nodes = [
        helper.make_node("Split", ["x"], ["left", "right"], axis=1, num_outputs=2),
        helper.make_node("Relu", ["left"], ["positive"]),
        helper.make_node("Sigmoid", ["right"], ["gate"]),
        helper.make_node("Add", ["positive", "gate"], ["total"]),
        helper.make_node("Neg", ["total"], ["negated"]),
    ]
    graph = helper.make_graph(
        nodes,
        "multiple_outputs",
        [tensor("x", FLOAT, [2, 4])],
        [tensor(name, FLOAT, [2, 2]) for name in ("positive", "gate", "total", "negated")]
        + [tensor("x", FLOAT, [2, 4])],
    )
    return model(graph)


def multiple_outputs_expected() -> list[np.ndarray]:
    x = floats(2, 4, seed=1)
    positive, gate = np.maximum(x[:, :2], 0), 1 / (1 + np.exp(-x[:, 2:]))
    return [positive, gate, positive + gate, -(positive + gate), x]


def initializer_as_input() -> onnx.ModelProto:
    """`w` is an initializer and also a graph input: a default the caller may override."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "initializer_as_input",
        [tensor("x", FLOAT, [2, 4]), tensor("w", FLOAT, [4, 3])],
        [tensor("y", FLOAT, [2, 3])],
        [init("w", floats(4, 3, seed=2))],
    )
    return model(graph)


def external_data() -> onnx.ModelProto:
    """A 64×64 weight (16 KiB) that `save_external_data` moves to a side file; the bias stays inline."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["projected"]),
            helper.make_node("Add", ["projected", "b"], ["y"]),
        ],
        "external_data",
        [tensor("x", FLOAT, [2, 64])],
        [tensor("y", FLOAT, [2, 64])],
        [init("w", floats(64, 64, seed=2) / 8), init("b", floats(64, seed=3))],
    )
    return model(graph)


def save_external_data(built: onnx.ModelProto, directory: Path, name: str = "external_data") -> Path:
    """Write `<name>.onnx` with every tensor over 1 KiB in `<name>.onnx.data` beside it."""
    path = Path(directory) / f"{name}.onnx"
    onnx.save_model(
        built,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=f"{name}.onnx.data",
        size_threshold=1024,
    )
    return path


def extra_domains() -> onnx.ModelProto:
    """Operators from `com.microsoft` (an ONNX Runtime contrib op) and `ai.onnx.ml` next to standard ones."""
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft"),
        helper.make_node("Binarizer", ["g"], ["mask"], domain="ai.onnx.ml", threshold=0.1),
        helper.make_node("Add", ["g", "mask"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "extra_domains", [tensor("x", FLOAT, [2, 4])], [tensor("y", FLOAT, [2, 4])]
    )
    return model(graph, extra_opsets={"com.microsoft": 1, "ai.onnx.ml": 3})


def extra_domains_expected() -> list[np.ndarray]:
    x = floats(2, 4, seed=1)
    gelu = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    return [(gelu + (gelu > 0.1)).astype(np.float32)]
