"""fold_shape_inputs: constant shape-like inputs become attributes, in one explicit form per op.

ONNX passes reshape targets, split sizes, slice bounds and axes as tensors; once they are constants,
rules should see plain attributes: ``reshape{shape}``, ``split{axis, sizes}`` with explicit sizes,
``slice{axes, starts, ends, steps}`` clamped to the dims, ``squeeze/unsqueeze{axes}``, ``reduce_mean{axes}``.
"""

from __future__ import annotations

import math

from graphopt.ir import Op, normalize_axis
from graphopt.rewrite import Fail, Rule, op, rewrite_pass


def _raw(match, attr: str):
    """The node, when it still has tensor inputs or lacks the attribute; None if already folded."""
    node = match.root
    if len(node.inputs) == 1 and attr in node.attrs:
        return None
    return node


def _refold(b, match, **attrs):
    node = match.root
    new = b.add(node.op, node.input(0), name=node.name, **attrs)
    return new.outputs


def reshape_pattern(x):
    return op.reshape(x, ...)


def check_reshape(match):
    node = _raw(match, "shape")
    if node is None:
        return None
    if "shape" not in node.attrs:
        return Fail(f"target shape {node.input(1).name!r} is computed at run time")
    return match.with_info(attrs={"shape": node.attrs["shape"]})


def split_pattern(x):
    return op.split(x, ...)


def check_split(match):
    node = _raw(match, "sizes")
    if node is None:
        return None
    x = match["x"]
    if x.rank is None:
        return Fail(f"rank of {x.name!r} is unknown")
    axis = normalize_axis(node.attrs["axis"], x.rank)
    sizes = node.attrs.get("sizes")
    if sizes is None:
        dim = x.shape[axis]
        if not isinstance(dim, int):
            return Fail(f"split dim {axis} of {x.name!r} is {dim!r}, not a known size")
        parts = node.attrs.get("num_outputs", len(node.outputs))
        chunk = math.ceil(dim / parts) if "num_outputs" in node.attrs else dim // parts
        if "num_outputs" not in node.attrs and dim % parts:
            return Fail(f"{dim} does not split evenly into {parts}")
        sizes = (chunk,) * (parts - 1) + (dim - chunk * (parts - 1),)
    if len(sizes) != len(node.outputs):
        return Fail(f"{len(sizes)} sizes for {len(node.outputs)} outputs")
    return match.with_info(attrs={"axis": axis, "sizes": tuple(sizes)})


def slice_pattern(x):
    return op.slice(x, ...)


def check_slice(match):
    node = _raw(match, "starts")
    if node is None:
        return None
    x = match["x"]
    if "starts" not in node.attrs:
        return Fail("slice bounds are computed at run time")
    if x.shape is None:
        return Fail(f"shape of {x.name!r} is unknown")
    axes, starts, ends, steps = [], [], [], []
    for axis, start, end, step in zip(
        *(node.attrs[k] for k in ("axes", "starts", "ends", "steps")), strict=True
    ):
        axis = normalize_axis(axis, x.rank)
        dim = x.shape[axis]
        if not isinstance(dim, int) or step <= 0:
            return Fail(f"slice of dim {axis} ({dim!r}, step {step}) has no static positive form")
        start, end, step = slice(start, end, step).indices(dim)
        axes.append(axis)
        starts.append(start)
        ends.append(max(end, start))
        steps.append(step)
    return match.with_info(
        attrs={"axes": tuple(axes), "starts": tuple(starts), "ends": tuple(ends), "steps": tuple(steps)}
    )


def _axes_check(match):
    node = _raw(match, "axes")
    if node is None:
        return None
    x = match["x"]
    axes = node.attrs.get("axes")
    if axes is None and node.op == Op.SQUEEZE and len(node.inputs) == 1 and x.shape is not None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
        if any(not isinstance(d, int) for d in x.shape):
            return Fail(f"which dims of {x.name!r} are 1 is not known statically")
    if axes is None:
        return Fail("axes are computed at run time")
    attrs = {"axes": tuple(axes)}
    if node.op == Op.REDUCE_MEAN:
        attrs["keepdims"] = node.attrs.get("keepdims", True)
    return match.with_info(attrs=attrs)


def axes_pattern(x):
    return op.any_of(Op.SQUEEZE, Op.UNSQUEEZE, Op.REDUCE_MEAN)(x, ...)


def replace(b, match):
    return _refold(b, match, **match.info["attrs"])


PASS = rewrite_pass(
    "fold_shape_inputs",
    "Turn constant shape, size, bound and axes inputs into attributes (one form per op).",
    [
        Rule("fold_reshape_shape", reshape_pattern, replace, check_reshape),
        Rule("fold_split_sizes", split_pattern, replace, check_split),
        Rule("fold_slice_bounds", slice_pattern, replace, check_slice),
        Rule("fold_axes", axes_pattern, replace, _axes_check),
    ],
)
