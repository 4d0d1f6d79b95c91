"""Small damaged models, one per bug the fuzzing found, and how to run the command line on a file
with everything it writes to stderr (ONNX Runtime's C++ log lines included)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.fuzz_loaders import judge, run_in_process


def model(nodes, inputs, outputs, initializers=(), opset=18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "damaged", inputs, outputs, list(initializers))
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    built.ir_version = 10
    return built


def info(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def matmul_relu() -> onnx.ModelProto:
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [info("x", [2, 8])],
        [info("y", [2, 8])],
        [const("w", np.eye(8, dtype=np.float32))],
    )


def spelled_layer_norm(eps) -> onnx.ModelProto:
    """x → (x - mean) / sqrt(var + eps) → Tanh, eps an initializer."""
    return model(
        [
            helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
            helper.make_node("Sub", ["x", "mean"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["sq"]),
            helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
            helper.make_node("Add", ["var", "eps"], ["v"]),
            helper.make_node("Sqrt", ["v"], ["s"]),
            helper.make_node("Div", ["d", "s"], ["n"]),
            helper.make_node("Tanh", ["n"], ["y"]),
        ],
        [info("x", [3, 8])],
        [info("y", [3, 8])],
        [const("eps", np.float32(eps))],
        opset=17,
    )


def run(tmp_path, command: str, path, *extra) -> tuple[int, str, str | None]:
    """(exit code, stderr, what is wrong with how it ended) of ``graphopt COMMAND path ...``."""
    args = [command, str(path), *map(str, extra)]
    if command == "optimize":
        args += ["-o", str(tmp_path / f"out{path.suffix}"), "--quiet"]
    before = {p.name for p in tmp_path.iterdir()}
    code, stderr = run_in_process(args)
    after = {p.name for p in tmp_path.iterdir()}
    return code, stderr, judge(args, code, stderr, before, after)
