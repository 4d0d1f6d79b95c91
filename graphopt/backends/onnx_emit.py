"""Canonical IR nodes → ONNX nodes, at the model's opset.

Only nodes that a pass created come here: nodes loaded from ONNX are written back from their own
NodeProto. Each emitter writes standard ops (or graphopt-domain fused ops) and the constants they need.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..fused.registry import FUSED_OPS
from ..ir import DType, Graph, GraphError, Node, Op, Tensor
from ..ir.ops import BINARY_POINTWISE
from . import embedding_bag_emit, fused_emit, group_norm_emit, jagged_bag_emit


class Emitter:
    """Collects the NodeProtos and initializers written for new nodes."""

    def __init__(self, graph: Graph, opset: int, reusable: set[str] | None = None):
        self.graph = graph
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        # Names the source model gave values that are gone now: a node written again under the same
        # name takes its values' old names back, so optimizing an optimized model writes the same bytes.
        self.reusable = reusable or set()

    def node(self, op_type: str, inputs, outputs, *, name: str, domain: str = "", **attrs) -> None:
        names = ["" if v is None else v if isinstance(v, str) else v.name for v in inputs]
        self.nodes.append(helper.make_node(op_type, names, outputs, name=name, domain=domain, **attrs))

    def temp(self, hint: str) -> str:
        if hint in self.reusable:
            self.reusable.discard(hint)
            self.graph.reserve_name(hint)  # (fresh_name never hands it out again)
            return hint
        name = self.graph.fresh_name(hint)
        self.reusable.discard(name)
        return name

    def const(self, array: np.ndarray, hint: str) -> str:
        name = self.temp(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def emit(self, node: Node) -> None:
        emitter = _EMITTERS.get(node.op)
        if emitter is None:
            raise GraphError(f"no ONNX form for {node.op} (node {node.name!r})")
        emitter(self, node)


def _outs(node: Node) -> list[str]:
    return [v.name for v in node.outputs]


def _unary(op_type: str) -> Callable[[Emitter, Node], None]:
    def emit(e: Emitter, node: Node) -> None:
        e.node(op_type, node.inputs, _outs(node), name=node.name)

    return emit


def _axes_op(op_type: str) -> Callable[[Emitter, Node], None]:
    """Squeeze and Unsqueeze: their axes moved from an attribute to an input at opset 13."""

    def emit(e: Emitter, node: Node) -> None:
        axes = list(node.attrs["axes"])
        if e.opset >= 13:
            listed = e.const(np.asarray(axes, dtype=np.int64), f"{node.name}_axes")
            e.node(op_type, [node.input(0), listed], _outs(node), name=node.name)
        else:
            e.node(op_type, [node.input(0)], _outs(node), name=node.name, axes=axes)

    return emit


def _reshape(e: Emitter, node: Node) -> None:
    shape = e.const(np.asarray(node.attrs["shape"], dtype=np.int64), f"{node.name}_shape")
    e.node("Reshape", [node.input(0), shape], _outs(node), name=node.name)


def _transpose(e: Emitter, node: Node) -> None:
    e.node("Transpose", [node.input(0)], _outs(node), name=node.name, perm=list(node.attrs["perm"]))


def _split(e: Emitter, node: Node) -> None:
    axis = node.attrs["axis"]
    if "sizes" not in node.attrs:
        # Sizes not known statically: the run-time sizes input, or else ONNX's equal split.
        given = node.input(1)
        parts = {"num_outputs": len(node.outputs)} if e.opset >= 18 and given is None else {}
        inputs = [node.input(0)] if given is None else [node.input(0), given]
        e.node("Split", inputs, _outs(node), name=node.name, axis=axis, **parts)
        return
    sizes = np.asarray(node.attrs["sizes"], dtype=np.int64)
    if e.opset >= 13:
        e.node(
            "Split",
            [node.input(0), e.const(sizes, f"{node.name}_sizes")],
            _outs(node),
            name=node.name,
            axis=axis,
        )
    else:
        e.node("Split", [node.input(0)], _outs(node), name=node.name, axis=axis, split=sizes.tolist())


def _slice(e: Emitter, node: Node) -> None:
    parts = [np.asarray(node.attrs[k], dtype=np.int64) for k in ("starts", "ends", "axes", "steps")]
    names = [
        e.const(p, f"{node.name}_{k}")
        for p, k in zip(parts, ("starts", "ends", "axes", "steps"), strict=True)
    ]
    e.node("Slice", [node.input(0), *names], _outs(node), name=node.name)


def _shape(e: Emitter, node: Node) -> None:
    bounds = {"start": node.attrs["start"]} if node.attrs.get("start", 0) else {}
    if node.attrs.get("end") is not None:
        bounds["end"] = node.attrs["end"]
    e.node("Shape", [node.input(0)], _outs(node), name=node.name, **bounds)


def _gather(e: Emitter, node: Node) -> None:
    e.node("Gather", node.inputs, _outs(node), name=node.name, axis=node.attrs["axis"])


def _concat(e: Emitter, node: Node) -> None:
    e.node("Concat", node.inputs, _outs(node), name=node.name, axis=node.attrs["axis"])


def _stack(e: Emitter, node: Node) -> None:
    """Concat + Reshape (two nodes) where the reshape target can be written; else N Unsqueeze + Concat.

    Both read back as the same stack; the first is also what the batching passes leave behind, so an
    optimized model optimizes to itself."""
    axis = node.attrs["axis"]
    target = _stack_target(node)
    if target is not None:
        joined = e.temp(f"{node.name}_joined")
        e.node("Concat", node.inputs, [joined], name=f"{node.name}/concat", axis=axis)
        shape = e.const(np.asarray(target, dtype=np.int64), f"{node.name}_shape")
        e.node("Reshape", [joined, shape], _outs(node), name=node.name)
        return
    pieces = []
    for i, value in enumerate(node.inputs):
        piece = e.temp(f"{node.name}_unsqueezed{i}")
        _emit_unsqueeze(e, value, piece, [axis], f"{node.name}/unsqueeze{i}")
        pieces.append(piece)
    e.node("Concat", pieces, _outs(node), name=node.name, axis=axis)


def _stack_target(node: Node) -> list[int] | None:
    """The Reshape target that turns the pieces' concat along ``axis`` into their stack, if writable:
    dims before the axis copied (0), the rest known, with at most one unknown (-1)."""
    axis = node.attrs["axis"]
    shapes = {v.shape for v in node.inputs}
    shape = next(iter(shapes))
    if len(shapes) != 1 or shape is None or axis >= len(shape):
        return None
    rest = [len(node.inputs), *shape[axis:]]
    if sum(not isinstance(d, int) for d in rest) > 1:
        return None
    return [0] * axis + [d if isinstance(d, int) else -1 for d in rest]


def _emit_unsqueeze(e: Emitter, value, out: str, axes: list[int], name: str) -> None:
    if e.opset >= 13:
        e.node("Unsqueeze", [value, e.const(np.asarray(axes, np.int64), f"{name}_axes")], [out], name=name)
    else:
        e.node("Unsqueeze", [value], [out], name=name, axes=axes)


def _cast(e: Emitter, node: Node) -> None:
    e.node("Cast", [node.input(0)], _outs(node), name=node.name, to=node.attrs["to"].onnx)


def _constant(e: Emitter, node: Node) -> None:
    tensor: Tensor = node.attrs["value"]
    e.node("Constant", [], _outs(node), name=node.name, value=numpy_helper.from_array(tensor.numpy()))


def _ones_like_norm(e: Emitter, node: Node, fill: float) -> str:
    x = node.input(0)
    axis = node.attrs["axis"] % x.rank
    shape = x.shape[axis:]
    if not all(isinstance(d, int) for d in shape):
        raise GraphError(f"{node.name}: a norm without scale needs static normalized dims, got {shape}")
    return e.const(np.full(shape, fill, dtype=x.dtype.numpy), f"{node.name}_{'scale' if fill else 'bias'}")


def _layer_norm(e: Emitter, node: Node) -> None:
    if e.opset < 17:
        _layer_norm_in_ops(e, node)
        return
    scale = node.input(1) if node.input(1) is not None else _ones_like_norm(e, node, 1.0)
    inputs = [node.input(0), scale] + ([node.input(2)] if node.input(2) is not None else [])
    e.node(
        "LayerNormalization",
        inputs,
        _outs(node),
        name=node.name,
        axis=node.attrs["axis"],
        epsilon=node.attrs["eps"],
    )


def _layer_norm_in_ops(e: Emitter, node: Node) -> None:
    """LayerNormalization is opset 17: before it, the spelling exporters used (a norm recognized in an
    older model, or batched from per-slice norms, goes back as it came)."""
    x, axis, eps = node.input(0), node.attrs["axis"], node.attrs["eps"]
    axes = list(range(axis % x.rank, x.rank))
    mean, centered, square, variance, shifted, root = (
        e.temp(f"{node.name}_{s}") for s in ("mean", "d", "sq", "var", "eps", "std")
    )
    _emit_reduce_mean(e, x, mean, axes, True, f"{node.name}/mean")
    e.node("Sub", [x, mean], [centered], name=f"{node.name}/sub")
    e.node("Mul", [centered, centered], [square], name=f"{node.name}/square")
    _emit_reduce_mean(e, square, variance, axes, True, f"{node.name}/var")
    epsilon = e.const(np.asarray(eps, x.dtype.numpy), f"{node.name}_epsilon")
    e.node("Add", [variance, epsilon], [shifted], name=f"{node.name}/add_eps")
    e.node("Sqrt", [shifted], [root], name=f"{node.name}/sqrt")
    steps = [("Mul", node.input(1)), ("Add", node.input(2))]
    steps = [(op, w) for op, w in steps if w is not None]
    out = _outs(node)[0] if not steps else e.temp(f"{node.name}_n")
    e.node("Div", [centered, root], [out], name=f"{node.name}/div" if steps else node.name)
    for i, (op, weight) in enumerate(steps):
        last = i == len(steps) - 1
        result = _outs(node)[0] if last else e.temp(f"{node.name}_scaled")
        e.node(op, [out, weight], [result], name=node.name if last else f"{node.name}/scale")
        out = result


def _rms_norm(e: Emitter, node: Node) -> None:
    x, axis, eps = node.input(0), node.attrs["axis"], node.attrs["eps"]
    if e.opset >= 23:
        scale = node.input(1) if node.input(1) is not None else _ones_like_norm(e, node, 1.0)
        e.node("RMSNormalization", [x, scale], _outs(node), name=node.name, axis=axis, epsilon=eps)
        return
    axes = list(range(axis % x.rank, x.rank))
    square, mean, shifted, root, normed = (
        e.temp(f"{node.name}_{s}") for s in ("sq", "ms", "eps", "rms", "n")
    )
    e.node("Mul", [x, x], [square], name=f"{node.name}/square")
    _emit_reduce_mean(e, square, mean, axes, True, f"{node.name}/mean")
    e.node(
        "Add",
        [mean, e.const(np.asarray(eps, x.dtype.numpy), f"{node.name}_epsilon")],
        [shifted],
        name=f"{node.name}/eps",
    )
    e.node("Sqrt", [shifted], [root], name=f"{node.name}/sqrt")
    if node.input(1) is None:
        e.node("Div", [x, root], _outs(node), name=node.name)
    else:
        e.node("Div", [x, root], [normed], name=f"{node.name}/div")
        e.node("Mul", [normed, node.input(1)], _outs(node), name=node.name)


def _emit_reduce_mean(e: Emitter, x, out: str, axes: list[int], keepdims: bool, name: str) -> None:
    if e.opset >= 18:
        e.node(
            "ReduceMean",
            [x, e.const(np.asarray(axes, np.int64), f"{name}_axes")],
            [out],
            name=name,
            keepdims=int(keepdims),
        )
    else:
        e.node("ReduceMean", [x], [out], name=name, axes=axes, keepdims=int(keepdims))


def _reduce_mean(e: Emitter, node: Node) -> None:
    _emit_reduce_mean(
        e,
        node.input(0),
        node.output.name,
        list(node.attrs["axes"]),
        node.attrs.get("keepdims", True),
        node.name,
    )


def _gelu(e: Emitter, node: Node) -> None:
    approximate = node.attrs.get("approximate", "none")
    # ONNX Runtime's float64 Gelu computes in float32 precision (errors of 6e-9): written out, it is exact.
    if e.opset >= 20 and node.input(0).dtype is not DType.FLOAT64:
        e.node("Gelu", [node.input(0)], _outs(node), name=node.name, approximate=approximate)
        return
    # Written in the order torch's exporter writes it, which ONNX Runtime's own GELU fusion expects.
    x, dtype, name = node.input(0), node.input(0).dtype.numpy, node.name

    def step(op_type: str, inputs: list, label: str) -> str:
        out = e.temp(f"{name}_{label}")
        e.node(op_type, inputs, [out], name=f"{name}/{label}")
        return out

    def const(value: float, label: str) -> str:
        return e.const(np.asarray(value, dtype), f"{name}_{label}")

    if approximate == "tanh":
        cube = step("Mul", [x, step("Mul", [x, x], "square")], "cube")
        inner = step("Add", [x, step("Mul", [const(0.044715, "c"), cube], "poly")], "inner")
        activation = step("Tanh", [step("Mul", [const(np.sqrt(2 / np.pi), "k"), inner], "scaled")], "tanh")
    else:
        activation = step("Erf", [step("Div", [x, const(np.sqrt(2.0), "sqrt2")], "scaled")], "erf")
    product = step("Mul", [x, step("Add", [activation, const(1.0, "one")], "plus")], "product")
    e.node("Mul", [product, const(0.5, "half")], _outs(node), name=name)


def _silu(e: Emitter, node: Node) -> None:
    gate = e.temp(f"{node.name}_sigmoid")
    e.node("Sigmoid", [node.input(0)], [gate], name=f"{node.name}/sigmoid")
    e.node("Mul", [node.input(0), gate], _outs(node), name=node.name)


def _rsqrt(e: Emitter, node: Node) -> None:
    root = e.temp(f"{node.name}_sqrt")
    e.node("Sqrt", [node.input(0)], [root], name=f"{node.name}/sqrt")
    e.node("Reciprocal", [root], _outs(node), name=node.name)


def _linear(e: Emitter, node: Node) -> None:
    x, weight, bias = node.input(0), node.input(1), node.input(2)
    if x.rank == 2:
        e.node("Gemm", [x, weight, bias], _outs(node), name=node.name, transB=1)
        return
    if weight.const is not None:
        transposed = e.const(weight.const.numpy().T, f"{weight.name}_t")
    else:
        transposed = e.temp(f"{weight.name}_t")
        e.node("Transpose", [weight], [transposed], name=f"{node.name}/transpose", perm=[1, 0])
    if bias is None:
        e.node("MatMul", [x, transposed], _outs(node), name=node.name)
        return
    product = e.temp(f"{node.name}_matmul")
    e.node("MatMul", [x, transposed], [product], name=f"{node.name}/matmul")
    e.node("Add", [product, bias], _outs(node), name=node.name)


_BINARY_TYPES = {Op.ADD: "Add", Op.SUB: "Sub", Op.MUL: "Mul", Op.DIV: "Div", Op.POW: "Pow"}
_UNARY_TYPES = {
    Op.IDENTITY: "Identity",
    Op.RELU: "Relu",
    Op.TANH: "Tanh",
    Op.SIGMOID: "Sigmoid",
    Op.ERF: "Erf",
    Op.SQRT: "Sqrt",
    Op.RECIPROCAL: "Reciprocal",
    Op.EXP: "Exp",
    Op.NEG: "Neg",
    Op.MATMUL: "MatMul",
    Op.LESS: "Less",
    Op.WHERE: "Where",
}

_EMITTERS: dict[str, Callable[[Emitter, Node], None]] = {
    **{op: _unary(t) for op, t in _UNARY_TYPES.items()},
    **{op: _unary(t) for op, t in _BINARY_TYPES.items() if op in BINARY_POINTWISE},
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _axes_op("Squeeze"),
    Op.UNSQUEEZE: _axes_op("Unsqueeze"),
    Op.SPLIT: _split,
    Op.SLICE: _slice,
    Op.GATHER: _gather,
    Op.SHAPE: _shape,
    Op.CONCAT: _concat,
    Op.STACK: _stack,
    Op.CAST: _cast,
    Op.CONSTANT: _constant,
    Op.LAYER_NORM: _layer_norm,
    Op.RMS_NORM: _rms_norm,
    Op.GROUP_NORM: group_norm_emit.emit_group_norm,
    Op.INSTANCE_NORM: group_norm_emit.emit_instance_norm,
    Op.REDUCE_MEAN: _reduce_mean,
    Op.EMBEDDING_BAG: embedding_bag_emit.emit_onnx,
    Op.JAGGED_BAG: jagged_bag_emit.emit_onnx,
    Op.GELU: _gelu,
    Op.SILU: _silu,
    Op.RSQRT: _rsqrt,
    Op.LINEAR: _linear,
    **{op.ir_op: fused_emit.emit_fused for op in FUSED_OPS},
}
