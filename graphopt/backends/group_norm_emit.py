"""ONNX forms of the canonical instance and group norms (``onnx_emit``'s table names them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..ir import GraphError, Node

if TYPE_CHECKING:
    from .onnx_emit import Emitter


def _outputs(node: Node) -> list[str]:
    return [v.name for v in node.outputs]


def emit_instance_norm(e: Emitter, node: Node) -> None:
    e.node("InstanceNormalization", node.inputs, _outputs(node), name=node.name, epsilon=node.attrs["eps"])


def emit_group_norm(e: Emitter, node: Node) -> None:
    """The spelling both torch exporters write (a group norm recognized from it, given back only when
    its original nodes could not be): Reshape, InstanceNormalization, Reshape, then the per-channel
    scale and bias; valid at every opset, unlike GroupNormalization, whose scale changed meaning."""
    x, groups, name = node.input(0), node.attrs["groups"], node.name
    dtype = x.dtype.numpy
    grouped, normed, shape, out = (e.temp(f"{name}_{s}") for s in ("grouped", "normed", "shape", "n"))
    split = e.const(np.asarray([0, groups, -1], dtype=np.int64), f"{name}_groups")
    e.node("Reshape", [x, split], [grouped], name=f"{name}/split")
    ones, zeros = (e.const(np.full(groups, v, dtype), f"{name}_{s}") for v, s in ((1, "ones"), (0, "zeros")))
    e.node(
        "InstanceNormalization",
        [grouped, ones, zeros],
        [normed],
        name=f"{name}/norm",
        epsilon=node.attrs["eps"],
    )
    e.node("Shape", [x], [shape], name=f"{name}/shape")
    steps = [(op, w) for op, w in (("Mul", node.input(1)), ("Add", node.input(2))) if w is not None]
    e.node(
        "Reshape",
        [normed, shape],
        [out] if steps else _outputs(node),
        name=f"{name}/merge" if steps else name,
    )
    for i, (op_type, weight) in enumerate(steps):
        tensor = weight.const
        if tensor is None or tensor.shape != (x.shape[1],):
            raise GraphError(f"no ONNX form for group norm {name!r}: its {op_type} weight is not per channel")
        per_channel = e.const(
            tensor.numpy().reshape((-1,) + (1,) * (x.rank - 2)), f"{weight.name}_per_channel"
        )
        last = i == len(steps) - 1
        result = _outputs(node)[0] if last else e.temp(f"{name}_scaled")
        e.node(op_type, [out, per_channel], [result], name=name if last else f"{name}/scale")
        out = result
