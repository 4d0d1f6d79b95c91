"""A random program (models/random_program.py) as an ONNX model, spelled as exporters spell it.

model = to_onnx(program)      # an onnx.ModelProto, checked with onnx.checker
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.random_program import (
    Act,
    Arith,
    Linear,
    Norm,
    Parallel,
    PieceOp,
    Program,
    Residual,
    Split,
    Views,
)
from models.random_weights import Weights

IR_VERSION = 10
ONNX_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE}


def to_onnx(program: Program) -> onnx.ModelProto:
    emitter = _Emitter(program)
    values = ["x"]
    extra: list[str] = []
    for index, step in enumerate(program.steps):
        emitter.step, emitter.width = index, program.widths[step.source]
        values.append(emitter.block(step.block, values[step.source], values, extra))
    outputs = [values[-1], *(values[i] for i in program.extra_outputs), *extra]
    outputs = list(dict.fromkeys(outputs))
    elem = ONNX_TYPES[program.dtype]
    rows = [program.rows] if program.rows is not None else []
    graph = helper.make_graph(
        emitter.nodes,
        "random_program",
        [helper.make_tensor_value_info(name, elem, [program.batch, *rows, w]) for name, w in emitter.inputs],
        [helper.make_tensor_value_info(name, elem, None) for name in outputs],
        emitter.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", program.opset)])
    model.ir_version = IR_VERSION
    _declare_output_shapes(model)
    onnx.checker.check_model(model)
    return model


def _declare_output_shapes(model: onnx.ModelProto) -> None:
    """Graph outputs need a shape: the one ONNX shape inference finds."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    types = {info.name: info.type for info in (*inferred.value_info, *inferred.output)}
    for output in model.graph.output:
        if output.name in types and types[output.name].tensor_type.HasField("shape"):
            output.type.CopyFrom(types[output.name])


class _Emitter:
    def __init__(self, program: Program):
        self.program = program
        self.weights = Weights(program)
        self.dtype = np.dtype(program.dtype)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0
        self.step = 0
        self.width = program.width  # of the value the current block reads
        self.inputs = [("x", program.width)]  # (name, width): x and the Parallel blocks' inputs

    # -- building blocks -------------------------------------------------------------------------

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attributes) -> list[str]:
        names = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(
            helper.make_node(op, inputs, names, name=self.name(f"n{self.step}_{op}"), **attributes)
        )
        return names

    def one(self, op: str, *inputs: str, **attributes) -> str:
        return self.node(op, list(inputs), **attributes)[0]

    def tensor(self, array: np.ndarray, hint: str = "c") -> str:
        array = np.asarray(array)
        if self.program.constants_as_nodes and array.size == 1:
            return self.one("Constant", value=numpy_helper.from_array(array))
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def scalar(self, value: float) -> str:
        return self.tensor(np.array(value, self.dtype))

    def ints(self, values) -> str:
        return self.tensor(np.array(list(values), np.int64), "shape")

    def reshape(self, x: str, dims: list[int]) -> str:
        return self.one("Reshape", x, self.ints(dims))

    def main_dims(self, width: int) -> list[int]:
        """A reshape target for [batch, (rows,) width]: -1 stands for a symbolic batch."""
        batch = self.program.batch if isinstance(self.program.batch, int) else -1
        return [batch, *([self.program.rows] if self.program.rows is not None else []), width]

    def reduce_mean(self, x: str, axis: int, keepdims: int = 1) -> str:
        if self.program.opset >= 18:
            return self.one("ReduceMean", x, self.ints([axis]), keepdims=keepdims)
        return self.one("ReduceMean", x, axes=[axis], keepdims=keepdims)

    def unsqueeze(self, x: str, axis: int) -> str:
        return self.one("Unsqueeze", x, self.ints([axis]))

    # -- blocks ----------------------------------------------------------------------------------

    def block(self, block, x: str, values: list[str], extra: list[str]) -> str:
        if isinstance(block, Act):
            return self.act(x, block.kind, block.spelled_out)
        if isinstance(block, Norm):
            return self.norm(block, x, values)
        if isinstance(block, Arith):
            return self.arith(block, x)
        if isinstance(block, Linear):
            return self.linear(block, x)
        if isinstance(block, Views):
            return self.views(block, x)
        if isinstance(block, Residual):
            return self.one("Add", x, values[block.other])
        if isinstance(block, Split):
            return self.split(block, x, extra)
        if isinstance(block, Parallel):
            return self.parallel(block, x)
        raise TypeError(block)

    def act(self, x: str, kind: str, spelled_out: bool) -> str:
        if kind == "gelu" and self.dtype == np.float64:
            kind = "gelu_tanh"  # ONNX Runtime has no float64 Erf on the CPU
        if kind in ("relu", "tanh", "sigmoid"):
            return self.one(kind.capitalize(), x)
        if kind == "silu":  # (no ONNX op before opset 24)
            return self.one("Mul", x, self.one("Sigmoid", x))
        if not spelled_out and self.program.opset >= 20:
            approximate = "tanh" if kind == "gelu_tanh" else "none"
            return self.one("Gelu", x, approximate=approximate)
        if kind == "gelu":  # the TorchScript exporter's spelling
            erf = self.one("Erf", self.one("Div", x, self.scalar(math.sqrt(2.0))))
            return self.one(
                "Mul", self.one("Mul", x, self.one("Add", erf, self.scalar(1.0))), self.scalar(0.5)
            )
        cube = self.one("Pow", x, self.scalar(3.0))
        inner = self.one("Add", x, self.one("Mul", cube, self.scalar(0.044715)))
        tanh = self.one("Tanh", self.one("Mul", inner, self.scalar(math.sqrt(2.0 / math.pi))))
        return self.one("Mul", self.one("Mul", self.scalar(0.5), x), self.one("Add", tanh, self.scalar(1.0)))

    def norm(self, block: Norm, x: str, values: list[str]) -> str:
        if block.residual is not None:
            x = self.one("Add", x, values[block.residual])
        width = self.width
        scale = self.tensor(self.weights.vector(width, center=1.0)) if block.scale else None
        bias = self.tensor(self.weights.vector(width)) if block.bias else None
        if block.kind == "layer" and block.spelling == "op":
            scale = scale or self.tensor(np.ones(width, self.dtype))
            inputs = [x, scale] + ([bias] if bias else [])
            y = self.one("LayerNormalization", *inputs, axis=-1, epsilon=block.eps)
        else:
            centered = x
            if block.kind == "layer":
                centered = self.one("Sub", x, self.reduce_mean(x, -1))
            if block.spelling == "pow_div":
                square = self.one("Pow", centered, self.scalar(2.0))
            else:
                square = self.one("Mul", centered, centered)
            root = self.one("Sqrt", self.one("Add", self.reduce_mean(square, -1), self.scalar(block.eps)))
            if block.spelling == "pow_div":
                y = self.one("Div", centered, root)
            else:
                y = self.one("Mul", centered, self.one("Reciprocal", root))
            if scale:
                y = self.one("Mul", y, scale)
            if bias:
                y = self.one("Add", y, bias)
        if block.act:
            y = self.act(y, block.act.kind, block.act.spelled_out)
        if block.head is None:
            return y
        y = self.one("MatMul", y, self.tensor(self.weights.matrix(width, block.head), "w"))
        y = self.one("Add", y, self.tensor(self.weights.vector(block.head), "b"))
        return self.act(y, block.head_act, False) if block.head_act else y

    def arith(self, block: Arith, x: str) -> str:
        width = self.width
        if block.per_channel:
            values = self.weights.vector(width, center=1.0 if block.op in ("mul", "div") else 0.0)
        else:
            values = np.array(self.weights.scalar(away_from_zero=block.op == "div"), self.dtype)
        if block.op == "div":
            values = np.where(np.abs(values) < 0.25, 0.5, values).astype(self.dtype)
        c = self.tensor(values)
        op = block.op.capitalize()
        return self.one(op, c, x) if block.constant_first else self.one(op, x, c)

    def linear(self, block: Linear, x: str) -> str:
        width = self.width
        weight = self.weights.matrix(width, block.out_width)
        bias = self.weights.vector(block.out_width) if block.bias else None
        if block.gemm:
            inputs = [x, self.tensor(weight.T.copy(), "w")] + (
                [self.tensor(bias, "b")] if bias is not None else []
            )
            return self.one("Gemm", *inputs, transB=1)
        y = self.one("MatMul", x, self.tensor(weight, "w"))
        return self.one("Add", y, self.tensor(bias, "b")) if bias is not None else y

    def views(self, block: Views, x: str) -> str:
        width = self.width
        dims = self.main_dims(width)
        if block.kind == "reshape_pair":
            inner = self.reshape(x, [*dims[:-1], width // block.inner, block.inner])
            return self.reshape(inner, dims)
        if block.kind == "unsqueeze_reshape":
            return self.reshape(self.unsqueeze(x, 1), dims)
        return self.reshape(x, dims)

    # -- horizontal structures -------------------------------------------------------------------

    def split(self, block: Split, x: str, extra: list[str]) -> str:
        rank = self.program.rank
        axis = block.axis
        size = self.width if axis == rank - 1 else self.program.rows
        sizes = _piece_sizes(size, block)
        pieces = self.cut(x, block, sizes)
        results = []
        for i, piece in enumerate(pieces):
            y = self.chain(piece, block.chain, i, len(pieces), other_act=block.differ == i)
            if block.leak == i:
                extra.append(y)
            results.append(y)
        if block.covered is not None:  # the uncovered rest joins unchanged
            rest = self.one("Slice", x, self.ints([sum(sizes)]), self.ints([size]), self.ints([axis]))
            results.append(rest)
        if block.source == "gather" or block.combine != "concat":
            return self.stack(results, block)
        return self.one("Concat", *results, axis=axis)

    def cut(self, x: str, block: Split, sizes: list[int]) -> list[str]:
        axis = block.axis
        if block.source == "gather":
            return [
                self.one("Gather", x, self.tensor(np.array(i, np.int64), "index"), axis=axis)
                for i in range(len(sizes))
            ]
        if block.source == "slice":
            bounds = np.cumsum([0, *sizes])
            return [
                self.one("Slice", x, self.ints([start]), self.ints([end]), self.ints([axis]))
                for start, end in itertools.pairwise(bounds)
            ]
        if block.source == "split_even" and self.program.opset >= 18 and not block.uneven:
            return self.node("Split", [x], len(sizes), axis=axis, num_outputs=len(sizes))
        return self.node("Split", [x, self.ints(sizes)], len(sizes), axis=axis)

    def stack(self, results: list[str], block: Split) -> str:
        """Unsqueeze + Concat (ONNX's stack), then back to the source's shape."""
        axis = block.axis
        width = self.width
        gathered = block.source == "gather"
        where = 0 if block.combine == "stack_first" else (axis if gathered else axis + 1)
        stacked = self.one("Concat", *(self.unsqueeze(r, where) for r in results), axis=where)
        if where == 0:
            rank = self.program.rank + (0 if gathered else 1)
            perm = list(range(1, rank))
            perm.insert(axis, 0)
            stacked = self.one("Transpose", stacked, perm=perm)
        if gathered and where != 0:
            return stacked
        return self.reshape(stacked, self.main_dims(width))

    def parallel(self, block: Parallel, x: str) -> str:
        starts = [f"p{self.step}_{i}" for i in range(block.sources)]
        self.inputs += [(name, self.width) for name in starts]
        results = [self.chain(s, block.chain, i, block.sources) for i, s in enumerate(starts)]
        stacked = self.one("Concat", *(self.unsqueeze(r, 0) for r in results), axis=0)
        return self.one("Add", x, self.reduce_mean(stacked, 0, keepdims=0))

    def chain(
        self, x: str, chain: tuple[PieceOp, ...], index: int, count: int, other_act: bool = False
    ) -> str:
        for op in chain:
            if op.kind == "act":
                kind = {"tanh": "sigmoid", "sigmoid": "relu", "relu": "tanh"}[op.act] if other_act else op.act
                x = self.one(kind.capitalize(), x)
            elif op.kind == "norm":
                mean = self.reduce_mean(x, -1)
                centered = self.one("Sub", x, mean)
                var = self.reduce_mean(self.one("Mul", centered, centered), -1)
                x = self.one("Div", centered, self.one("Sqrt", self.one("Add", var, self.scalar(1e-5))))
            else:
                value = 1.0 + 0.125 * (index + 1) if op.per_piece else 1.5
                c = self.scalar(value if op.kind == "scale" else value - 1.0)
                x = self.one("Mul" if op.kind == "scale" else "Add", x, c)
        return x


def _piece_sizes(size: int, block: Split) -> list[int]:
    if block.uneven:
        base = size // block.pieces
        sizes = [base] * block.pieces
        sizes[0] -= 1
        sizes[-1] += 1
        return sizes
    count = block.covered if block.covered is not None else block.pieces
    return [size // block.pieces] * count
