"""Which aten calls map to which canonical ops, with their attributes in canonical spelling.

``translate(fx_node)`` returns the IR nodes ("members") one FX call becomes, or None to carry the call
through verbatim. Most calls become one member; ``addmm`` becomes matmul + add and ``unbind`` a split
plus a squeeze per piece. A call maps only where the canonical op means exactly the same thing:
torch's ``squeeze`` of a dim that is not 1 is a no-op (ONNX's is an error), a literal 0 in a torch
view is a zero-size dim (in the canonical reshape it copies the input dim), type promotion has no
canonical spelling, and so on; such calls stay verbatim.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ..fused.spec import DOMAIN
from ..ir import DType, Op
from .aten_conversions import CONVERSIONS
from .aten_fused import translate_fused
from .aten_members import (
    INTERNAL,
    Internal,
    Member,
    Scalar,
    axes_of,
    axis_of,
    bind,
    dtype_of,
    ints,
    is_node,
    one,
    rank_of,
    static_dims,
    tensor_val,
)

aten = torch.ops.aten

Handler = Callable[[fx.Node, dict[str, Any]], list[Member] | None]


def translate(node: fx.Node, target: Any = None) -> list[Member] | None:
    """``target``: the op to read the call as, when not its own (an in-place call's functional form)."""
    target = node.target if target is None else target
    if target.namespace == DOMAIN:
        return translate_fused(target._opname, bind(node, target))
    handler = _HANDLERS.get(target)
    if handler is None:
        return None
    return handler(node, bind(node, target))


# ----- handlers --------------------------------------------------------------------------------


def _unary(op: str) -> Handler:
    def handle(node, a):
        return one(op, [node.args[0]]) if len(node.args) == 1 and not node.kwargs else None

    return handle


def _gelu(node, a):
    return one(Op.GELU, [a["self"]], approximate=a["approximate"])


def _binary(op: str, swapped: bool = False) -> Handler:
    """add / sub / mul / div / pow with tensors or Python numbers. Where a narrower float tensor meets
    a wider one (T5's ``hidden * torch.rsqrt(variance)``, bfloat16 times float32), torch converts it
    to the result's dtype, exactly, and computes there: a Cast member says so. No other promotion."""

    def handle(node, a):
        if a.get("alpha", 1) != 1 or "rounding_mode" in node.kwargs:
            return None
        left, right = list(node.args[:2])
        if swapped:
            left, right = right, left
        out = dtype_of(node)
        if out is None:
            return None
        members, operands = [], []
        for value in (left, right):
            if is_node(value):
                dtype = dtype_of(value)
                if dtype != out and not _widens(dtype, out):
                    return None
                if dtype != out:
                    members.append(Member(Op.CAST, [value], {"to": out}, results=[INTERNAL]))
                    value = Internal(len(members) - 1, 0)
                operands.append(value)
            elif type(value) in (int, float) and (out.is_float or type(value) is int):
                operands.append(Scalar(value, out))
            else:
                return None
        return [*members, Member(op, operands)]

    return handle


def _widens(dtype: DType | None, out: DType) -> bool:
    """Whether converting float ``dtype`` to float ``out`` is exact (every value kept)."""
    return dtype is not None and dtype.is_float and out.is_float and dtype.itemsize < out.itemsize


def _layer_norm(node, a, *, native: bool = False):
    shape, x = ints(a["normalized_shape"]), a["input"]
    rank = rank_of(x)
    if shape is None or rank is None or len(shape) > rank or (native and _reads_beyond(node, 0)):
        return None
    attrs = {"axis": rank - len(shape), "eps": float(a["eps"])}
    # native_layer_norm returns (y, mean, rstd): the IR node is element 0 of its result
    return [Member(Op.LAYER_NORM, [x, a["weight"], a["bias"]], attrs, results=[0] if native else [None])]


def _reads_beyond(node: fx.Node, last: int) -> bool:
    """Whether a multi-output node's results after ``last`` are read (or the tuple itself is)."""
    return any(user.target is not operator.getitem or user.args[1] > last for user in node.users)


def _group_norm(node, a):
    x = a["input"]
    if rank_of(x) is None or rank_of(x) < 2:
        return None
    return one(Op.GROUP_NORM, [x, a["weight"], a["bias"]], groups=int(a["num_groups"]), eps=float(a["eps"]))


def _native_group_norm(node, a):
    """native_group_norm returns (y, mean, rstd): the IR node is element 0 of its result."""
    x = a["input"]
    if rank_of(x) is None or rank_of(x) < 2 or _reads_beyond(node, 0) or type(a["group"]) is not int:
        return None
    attrs = {"groups": a["group"], "eps": float(a["eps"])}
    return [Member(Op.GROUP_NORM, [x, a["weight"], a["bias"]], attrs, results=[0])]


def _rms_norm(node, a):
    shape, x = ints(a["normalized_shape"]), a["input"]
    rank, val = rank_of(x), tensor_val(x)
    if shape is None or rank is None or len(shape) > rank:
        return None
    eps = a["eps"] if a["eps"] is not None else torch.finfo(val.dtype).eps
    return one(Op.RMS_NORM, [x, a["weight"]], axis=rank - len(shape), eps=float(eps))


def _split_sizes(node: fx.Node, x: fx.Node, dim: Any) -> tuple[int, tuple[int, ...]] | None:
    """The split's axis and the sizes of its pieces, read from the pieces' values."""
    axis = axis_of(dim, rank_of(x))
    pieces = node.meta.get("val")
    if axis is None or not isinstance(pieces, list | tuple):
        return None
    sizes = tuple(p.shape[axis] for p in pieces)
    return (axis, sizes) if all(type(s) is int for s in sizes) else None


def _split(node, a):
    found = _split_sizes(node, a["self"], a["dim"])
    if found is None:
        return None
    axis, sizes = found
    return [Member(Op.SPLIT, [a["self"]], {"axis": axis, "sizes": sizes}, results=list(range(len(sizes))))]


def _unbind(node, a):
    """unbind(x, d) is split(x, [1] * n, d) and a squeeze of d per piece."""
    axis, pieces = axis_of(a["dim"], rank_of(a["self"])), node.meta.get("val")
    if axis is None or not isinstance(pieces, list | tuple):
        return None
    count = len(pieces)
    split = Member(Op.SPLIT, [a["self"]], {"axis": axis, "sizes": (1,) * count}, results=[INTERNAL] * count)
    squeezes = [Member(Op.SQUEEZE, [Internal(0, i)], {"axes": (axis,)}, results=[i]) for i in range(count)]
    return [split, *squeezes]


def _slice(node, a):
    """slice(x, dim, start, end, step): the canonical slice, bounds clamped to the (static) dim."""
    val = tensor_val(a["self"])
    axis = axis_of(a["dim"], None if val is None else val.dim())
    if axis is None or type(val.shape[axis]) is not int:
        return None
    start, end, step = a["start"], a["end"], a["step"]
    if any(v is not None and type(v) is not int for v in (start, end)) or type(step) is not int or step <= 0:
        return None
    start, end, step = slice(start, end, step).indices(val.shape[axis])
    return one(Op.SLICE, [a["self"]], axes=(axis,), starts=(start,), ends=(max(end, start),), steps=(step,))


def _select(node, a):
    """select(x, dim, i) is a gather of the scalar index i along dim."""
    val = tensor_val(a["self"])
    axis = axis_of(a["dim"], None if val is None else val.dim())
    index = a["index"]
    if axis is None or type(index) is not int or type(val.shape[axis]) is not int:
        return None
    return one(Op.GATHER, [a["self"], Scalar(index % val.shape[axis], DType.INT64)], axis=axis)


def _reshape(node, a):
    shape = ints(a.get("size", a.get("shape")))
    if shape is None or 0 in shape:
        return None  # SymInt dims, or a literal 0 (a zero-size dim in torch, "copy" in the IR)
    return one(Op.RESHAPE, [a["self"]], shape=shape)


def _stack(node, a):
    tensors = a["tensors"]
    rank = rank_of(tensors[0]) if tensors and all(is_node(t) for t in tensors) else None
    axis = axis_of(a["dim"], None if rank is None else rank + 1)
    return None if axis is None else one(Op.STACK, list(tensors), axis=axis)


def _cat(node, a):
    tensors = a["tensors"]
    ranks = {rank_of(t) if is_node(t) else None for t in tensors}
    rank = ranks.pop() if len(ranks) == 1 else None
    axis = axis_of(a["dim"], rank)
    return None if axis is None else one(Op.CONCAT, list(tensors), axis=axis)


def _permute(node, a):
    rank, dims = rank_of(a["self"]), ints(a["dims"])
    if rank is None or dims is None or len(dims) != rank:
        return None
    perm = tuple(d % rank for d in dims) if rank else ()
    return one(Op.TRANSPOSE, [a["self"]], perm=perm) if sorted(perm) == list(range(rank)) else None


def _t(node, a):
    return one(Op.TRANSPOSE, [a["self"]], perm=(1, 0)) if rank_of(a["self"]) == 2 else None


def _transpose(node, a):
    rank = rank_of(a["self"])
    d0, d1 = axis_of(a["dim0"], rank), axis_of(a["dim1"], rank)
    if d0 is None or d1 is None:
        return None
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return one(Op.TRANSPOSE, [a["self"]], perm=tuple(perm))


def _matmul(node, a):
    left, right = node.args[:2]
    return one(Op.MATMUL, [left, right]) if dtype_of(left) == dtype_of(right) == dtype_of(node) else None


def _addmm(node, a):
    bias, x, weight = a["self"], a["mat1"], a["mat2"]
    if a["beta"] != 1 or a["alpha"] != 1 or not dtype_of(bias) == dtype_of(x) == dtype_of(weight):
        return None
    return [
        Member(Op.MATMUL, [x, weight], results=[INTERNAL]),
        Member(Op.ADD, [Internal(0, 0), bias]),
    ]


def _linear(node, a):
    return one(Op.LINEAR, [a["input"], a["weight"], a["bias"]])


def _unsqueeze(node, a):
    rank = rank_of(a["self"])
    axis = axis_of(a["dim"], None if rank is None else rank + 1)
    return None if axis is None else one(Op.UNSQUEEZE, [a["self"]], axes=(axis,))


def _squeeze(node, a):
    val = tensor_val(a["self"])
    if val is None:
        return None
    dims = a.get("dims", a.get("dim"))
    if dims is None:
        if static_dims(val) is None:
            return None
        axes = tuple(i for i, d in enumerate(val.shape) if d == 1)
    else:
        axes = axes_of([dims] if type(dims) is int else dims, val.dim())
    # torch leaves a dim that is not 1 alone; the canonical squeeze would reject it
    if axes is None or any(type(val.shape[i]) is not int or val.shape[i] != 1 for i in axes):
        return None
    return one(Op.SQUEEZE, [a["self"]], axes=axes)


def _reduced_axes(a) -> tuple[int, ...] | None:
    rank = rank_of(a["self"])
    dims = a.get("dim")
    if not dims and rank is not None:
        return tuple(range(rank))  # torch reduces every dim for an empty or absent list
    return axes_of(dims, rank)


def _mean(node, a):
    axes = _reduced_axes(a)
    if axes is None or a.get("dtype") is not None:
        return None
    return one(Op.REDUCE_MEAN, [a["self"]], axes=axes, keepdims=bool(a["keepdim"]))


def _var_mean(node, a):
    axes = _reduced_axes(a)
    if "unbiased" in a:  # var_mean.dim
        correction = 1 if a["unbiased"] else 0
    else:
        correction = 1 if a["correction"] is None else a["correction"]
    if axes is None or type(correction) is not int:
        return None
    attrs = {"axes": axes, "correction": correction, "keepdims": bool(a["keepdim"])}
    return [Member(Op.VAR_MEAN, [a["self"]], attrs, results=[0, 1])]


def _dropout(node, a):
    return None if a["train"] else one(Op.IDENTITY, [a["input"]])


_UNARY = {
    aten.relu.default: Op.RELU,
    aten.tanh.default: Op.TANH,
    aten.sigmoid.default: Op.SIGMOID,
    aten.silu.default: Op.SILU,
    aten.erf.default: Op.ERF,
    aten.sqrt.default: Op.SQRT,
    aten.rsqrt.default: Op.RSQRT,
    aten.reciprocal.default: Op.RECIPROCAL,
    aten.exp.default: Op.EXP,
    aten.neg.default: Op.NEG,
}
_BINARY = {
    (aten.add.Tensor, aten.add.Scalar): _binary(Op.ADD),
    (aten.sub.Tensor, aten.sub.Scalar): _binary(Op.SUB),
    (aten.rsub.Scalar,): _binary(Op.SUB, swapped=True),
    (aten.mul.Tensor, aten.mul.Scalar): _binary(Op.MUL),
    (aten.div.Tensor, aten.div.Scalar): _binary(Op.DIV),
    (aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar): _binary(Op.POW),
}
_HANDLERS: dict[Any, Handler] = {
    **{target: _unary(op) for target, op in _UNARY.items()},
    **{target: handler for targets, handler in _BINARY.items() for target in targets},
    aten.gelu.default: _gelu,
    aten.layer_norm.default: _layer_norm,
    aten.native_layer_norm.default: lambda node, a: _layer_norm(node, a, native=True),
    aten.rms_norm.default: _rms_norm,
    aten.group_norm.default: _group_norm,
    aten.native_group_norm.default: _native_group_norm,
    **dict.fromkeys((aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default), _split),
    aten.unbind.int: _unbind,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    **dict.fromkeys((aten.view.default, aten.reshape.default, aten._unsafe_view.default), _reshape),
    aten.stack.default: _stack,
    aten.cat.default: _cat,
    aten.permute.default: _permute,
    aten.t.default: _t,
    aten.transpose.int: _transpose,
    **dict.fromkeys((aten.mm.default, aten.bmm.default, aten.matmul.default), _matmul),
    aten.addmm.default: _addmm,
    aten.linear.default: _linear,
    aten.unsqueeze.default: _unsqueeze,
    **dict.fromkeys((aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims), _squeeze),
    aten.mean.dim: _mean,
    **dict.fromkeys((aten.var_mean.correction, aten.var_mean.dim), _var_mean),
    **CONVERSIONS,
    aten.dropout.default: _dropout,
}
