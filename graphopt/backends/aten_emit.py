"""Canonical IR nodes → aten calls (and ``torch.ops.graphopt.*`` for the fused ops).

Only nodes a pass created (or changed) come here: nodes loaded from a program are written back from
their own FX calls. The ops chosen are functional and valid both in a program as exported and after
``run_decompositions()``. A 0-d constant operand of a binary op is written as a Python number, as
torch.export itself records ``x * 0.5``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..fused.registry import FUSED_OPS, by_ir_op
from ..ir import GraphError, Node, Op, constant_of
from .embedding_bag_emit import emit_aten as _embedding_bag
from .fx_build import FxBuilder
from .jagged_bag_emit import emit_aten as _jagged_bag

aten = torch.ops.aten
Emitter = Callable[[FxBuilder, Node], list[Any]]


def emit(b: FxBuilder, node: Node) -> None:
    emitter = _EMITTERS.get(node.op)
    if emitter is None:
        raise GraphError(f"no aten form for {node.op} (node {node.name!r})")
    b.rule = node.meta.get("rule")
    try:
        b.bind(node, emitter(b, node))
    finally:
        b.rule = None


def _name(node: Node, index: int = 0) -> str:
    return node.outputs[index].name


def _x(b: FxBuilder, node: Node, index: int = 0):
    return b.arg(node.input(index))


def _unary(target, **kwargs) -> Emitter:
    def write(b, node):
        return [b.call(target, (_x(b, node),), kwargs, name=_name(node))]

    return write


def _gelu(b, node):
    approximate = node.attrs.get("approximate", "none")
    return [b.call(aten.gelu.default, (_x(b, node),), {"approximate": approximate}, name=_name(node))]


def _scalar(value) -> float | int | None:
    """The Python number of a 0-d constant, or None."""
    tensor = constant_of(value)
    if tensor is None or tensor.shape != ():
        return None
    number = tensor.scalar()
    return float(number) if tensor.dtype.is_float else int(number)


_BINARY = {
    Op.ADD: aten.add.Tensor,
    Op.SUB: aten.sub.Tensor,
    Op.MUL: aten.mul.Tensor,
    Op.DIV: aten.div.Tensor,
    Op.POW: aten.pow.Tensor_Tensor,
}


def _binary(b, node):
    left, right = node.input(0), node.input(1)
    target = _BINARY[node.op]
    if _scalar(left) is not None and _scalar(right) is None and node.op in (Op.ADD, Op.MUL):
        left, right = right, left  # commutative: keep the tensor first, the number second
    number = _scalar(right) if _scalar(left) is None else None
    if number is not None:
        target = aten.pow.Tensor_Scalar if node.op == Op.POW else target
        return [b.call(target, (b.arg(left), number), name=_name(node))]
    return [b.call(target, (b.arg(left), b.arg(right)), name=_name(node))]


def _less(b, node):
    return [b.call(aten.lt.Tensor, (_x(b, node, 0), _x(b, node, 1)), name=_name(node))]


def _where(b, node):
    return [b.call(aten.where.self, tuple(_x(b, node, i) for i in range(3)), name=_name(node))]


def _reshape(b, node):
    x = node.input(0)
    shape = node.attrs.get("shape")
    if shape is None:
        target = constant_of(node.input(1)) if node.input(1) is not None else None
        if target is None:
            raise GraphError(f"{node.name}: a reshape to a computed shape has no aten form")
        shape = tuple(int(d) for d in target.numpy().reshape(-1))
    sizes = [b.dim(x, i) if d == 0 else d for i, d in enumerate(shape)]
    # Always reshape, never view: whether a value is contiguous is a property of the kernel that made
    # it (attention's output layout differs between CPU and CUDA kernels, and between torch versions),
    # not of the program, so a view that was valid at export can fail where the program runs.
    return [b.call(aten.reshape.default, (b.arg(x), sizes), name=_name(node))]


def _transpose(b, node):
    return [b.call(aten.permute.default, (_x(b, node), list(node.attrs["perm"])), name=_name(node))]


def _squeeze(b, node):
    return [b.call(aten.squeeze.dims, (_x(b, node), list(node.attrs["axes"])), name=_name(node))]


def _unsqueeze(b, node):
    rank = node.input(0).rank + len(node.attrs["axes"])
    result = _x(b, node)
    axes = sorted(a % rank for a in node.attrs["axes"])
    for i, axis in enumerate(axes):
        name = _name(node) if i == len(axes) - 1 else f"{_name(node)}_{i}"
        result = b.call(aten.unsqueeze.default, (result, axis), name=name)
    return [result]


def _split(b, node):
    sizes = list(node.attrs["sizes"])
    pieces = b.call(aten.split_with_sizes.default, (_x(b, node), sizes, node.attrs["axis"]), name=node.name)
    return [b.getitem(pieces, i, _name(node, i)) for i in range(len(sizes))]


def _slice(b, node):
    result = _x(b, node)
    bounds = (node.attrs[k] for k in ("axes", "starts", "ends", "steps"))
    for axis, start, end, step in zip(*bounds, strict=True):
        result = b.call(aten.slice.Tensor, (result, axis, start, end, step), name=_name(node))
    return [result]


def _gather(b, node):
    indices = node.input(1)
    axis = node.attrs["axis"] % node.input(0).rank
    if indices.rank == 0 and _scalar(indices) is not None:
        return [b.call(aten.select.int, (_x(b, node), axis, _scalar(indices)), name=_name(node))]
    if indices.rank == 1:
        return [b.call(aten.index_select.default, (_x(b, node), axis, b.arg(indices)), name=_name(node))]
    raise GraphError(f"{node.name}: a gather with rank-{indices.rank} indices has no aten form here")


def _concat(b, node):
    parts = [b.arg(v) for v in node.inputs]
    return [b.call(aten.cat.default, (parts, node.attrs["axis"]), name=_name(node))]


def _stack(b, node):
    """cat + view where the pieces share one shape and the axis is one of theirs (what the batching
    passes leave behind, so an optimized program optimizes to itself); else unsqueeze each + cat."""
    axis = node.attrs["axis"] % (node.input(0).rank + 1)
    piece = node.input(0)
    if piece.shape is not None and axis < piece.rank and all(v.shape == piece.shape for v in node.inputs):
        joined = b.call(aten.cat.default, ([b.arg(v) for v in node.inputs], axis), name=f"{_name(node)}_cat")
        sizes = [b.dim(piece, i) for i in range(piece.rank)]
        sizes.insert(axis, len(node.inputs))
        return [b.call(aten.view.default, (joined, sizes), name=_name(node))]
    parts = [
        b.call(aten.unsqueeze.default, (b.arg(v), axis), name=f"{_name(node)}_unsqueeze{i}")
        for i, v in enumerate(node.inputs)
    ]
    return [b.call(aten.cat.default, (parts, axis), name=_name(node))]


def _cast(b, node):
    dtype = node.attrs["to"].torch
    return [b.call(aten._to_copy.default, (_x(b, node),), {"dtype": dtype}, name=_name(node))]


def _constant(b, node):
    return [b.lifted_constant(node.output)]


def _normalized_shape(b, node) -> list:
    x = node.input(0)
    axis = node.attrs["axis"] % x.rank
    return [b.dim(x, i) for i in range(axis, x.rank)]


def _layer_norm(b, node):
    scale, bias = b.arg(node.input(1)), b.arg(node.input(2))
    args = (_x(b, node), _normalized_shape(b, node), scale, bias, node.attrs["eps"])
    result = b.call(aten.native_layer_norm.default, args, name=f"{node.name}_native")
    return [b.getitem(result, 0, _name(node))]


def _group_norm(b, node):
    scale, bias = b.arg(node.input(1)), b.arg(node.input(2))
    args = (_x(b, node), int(node.attrs["groups"]), scale, bias, float(node.attrs["eps"]))
    return [b.call(aten.group_norm.default, args, name=_name(node))]


def _rms_norm(b, node):
    args = (_x(b, node), _normalized_shape(b, node), b.arg(node.input(1)), node.attrs["eps"])
    return [b.call(aten.rms_norm.default, args, name=_name(node))]


def _reduce_mean(b, node):
    args = (_x(b, node), list(node.attrs["axes"]), bool(node.attrs.get("keepdims", True)))
    return [b.call(aten.mean.dim, args, name=_name(node))]


def _var_mean(b, node):
    x, axes, keep = _x(b, node), list(node.attrs["axes"]), bool(node.attrs.get("keepdims", True))
    kwargs = {"correction": node.attrs.get("correction", 1), "keepdim": keep}
    var = b.call(aten.var.correction, (x, axes), kwargs, name=_name(node, 0))
    mean = b.call(aten.mean.dim, (x, axes, keep), name=_name(node, 1))
    return [var, mean]


def _matmul(b, node):
    left, right = node.input(0), node.input(1)
    target = aten.mm.default if left.rank == right.rank == 2 else aten.matmul.default
    return [b.call(target, (b.arg(left), b.arg(right)), name=_name(node))]


def _linear(b, node):
    args = (_x(b, node), b.arg(node.input(1)), b.arg(node.input(2)))
    return [b.call(aten.linear.default, args, name=_name(node))]


def _identity(b, node):
    return [_x(b, node)]


def _fused(b, node):
    """A fused op as the call of the torch form its present inputs select (its spec's forms)."""
    import graphopt.fused.torch_ops  # noqa: F401  (registers torch.ops.graphopt.*)

    op = by_ir_op(node.op)
    form = op.form_for([node.input(i) is not None for i in range(len(op.inputs))])
    args = [b.arg(node.input(op.port_index(port))) for port in form.inputs]
    args += [a.value_type(node.attrs.get(a.ir_name, a.default)) for a in op.attributes]
    target = getattr(torch.ops.graphopt, form.name).default
    if len(form.outputs) == 1:
        return [b.call(target, tuple(args), name=_name(node))]
    call = b.call(target, tuple(args), name=node.name)
    ports = [p.name for p in op.outputs]
    return [b.getitem(call, form.outputs.index(ports[i]), _name(node, i)) for i in range(len(node.outputs))]


_EMITTERS: dict[str, Emitter] = {
    Op.IDENTITY: _identity,
    Op.RELU: _unary(aten.relu.default),
    Op.TANH: _unary(aten.tanh.default),
    Op.SIGMOID: _unary(aten.sigmoid.default),
    Op.SILU: _unary(aten.silu.default),
    Op.ERF: _unary(aten.erf.default),
    Op.SQRT: _unary(aten.sqrt.default),
    Op.RSQRT: _unary(aten.rsqrt.default),
    Op.RECIPROCAL: _unary(aten.reciprocal.default),
    Op.EXP: _unary(aten.exp.default),
    Op.NEG: _unary(aten.neg.default),
    Op.GELU: _gelu,
    **dict.fromkeys(_BINARY, _binary),
    Op.LESS: _less,
    Op.WHERE: _where,
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _squeeze,
    Op.UNSQUEEZE: _unsqueeze,
    Op.SPLIT: _split,
    Op.SLICE: _slice,
    Op.GATHER: _gather,
    Op.EMBEDDING_BAG: _embedding_bag,
    Op.JAGGED_BAG: _jagged_bag,
    Op.CONCAT: _concat,
    Op.STACK: _stack,
    Op.CAST: _cast,
    Op.CONSTANT: _constant,
    Op.LAYER_NORM: _layer_norm,
    Op.RMS_NORM: _rms_norm,
    Op.GROUP_NORM: _group_norm,
    Op.REDUCE_MEAN: _reduce_mean,
    Op.VAR_MEAN: _var_mean,
    Op.MATMUL: _matmul,
    Op.LINEAR: _linear,
    **{op.ir_op: _fused for op in FUSED_OPS},
}
