"""fold_shape_inputs: constant shape-like inputs become attributes, in one explicit form per op.

ONNX passes reshape targets, split sizes, slice bounds and axes as tensors; once they are constants,
rules should see plain attributes: ``reshape{shape}``, ``split{axis, sizes}`` with explicit sizes,
``slice{axes, starts, ends, steps}`` clamped to the dims, ``squeeze/unsqueeze{axes}``, ``reduce_mean{axes}``.
"""

from __future__ import annotations

import math

from graphopt.ir import Op, constant_of, normalize_axis
from graphopt.rewrite import Fail, InPlace, Rule, op, rewrite_pass


def _raw(match, attr: str):
    """The node, when it still has tensor inputs or lacks the attribute; None if already folded."""
    node = match.root
    if len(node.inputs) == 1 and attr in node.attrs:
        return None
    return node


def _ints(value) -> tuple[int, ...] | None:
    tensor = constant_of(value) if value is not None else None
    return None if tensor is None else tensor.ints()


def current_attrs(node) -> dict:
    """The node's attributes, with its shape-like inputs read in where they are constants by now
    (constant folding may have made them so after the frontend looked)."""
    attrs = dict(node.attrs)
    extra = [node.input(i) for i in range(1, len(node.inputs))]
    if not extra:
        return attrs
    if node.op == Op.SLICE:
        starts, ends = _ints(extra[0]), _ints(extra[1]) if len(extra) > 1 else None
        if starts is None or ends is None:
            return attrs
        axes = _ints(extra[2]) if len(extra) > 2 and extra[2] is not None else tuple(range(len(starts)))
        steps = _ints(extra[3]) if len(extra) > 3 and extra[3] is not None else (1,) * len(starts)
        if axes is not None and steps is not None:
            attrs.update(starts=starts, ends=ends, axes=axes, steps=steps)
        return attrs
    key = {Op.RESHAPE: "shape", Op.SPLIT: "sizes"}.get(node.op, "axes")
    found = _ints(extra[0])
    if found is not None:
        attrs[key] = found
    return attrs


def _refold(b, match, **attrs):
    node = match.root
    return InPlace(attrs, inputs=(node.input(0),))


def reshape_pattern(x):
    return op.reshape(x, ...)


def check_reshape(match):
    node = _raw(match, "shape")
    if node is None:
        return None
    attrs = current_attrs(node)
    if "shape" not in attrs:
        return Fail(f"target shape {node.input(1).name!r} is computed at run time")
    return match.with_info(attrs={"shape": attrs["shape"]})


def split_pattern(x):
    return op.split(x, ...)


def check_split(match):
    node = _raw(match, "sizes")
    if node is None:
        return None
    x = match["x"]
    if x.rank is None:
        return Fail(f"rank of {x.name!r} is unknown")
    attrs = current_attrs(node)
    axis = normalize_axis(attrs["axis"], x.rank)
    sizes = attrs.get("sizes")
    given = node.input(1)
    if sizes is None and given is not None:
        # Sizes fed or computed at run time: an equal split would compute something else.
        return Fail(f"split sizes {given.name!r} are only known at run time")
    if sizes is None:
        dim = x.shape[axis]
        if not isinstance(dim, int):
            return Fail(f"split dim {axis} of {x.name!r} is {dim!r}, not a known size")
        parts = attrs.get("num_outputs", len(node.outputs))
        chunk = math.ceil(dim / parts) if "num_outputs" in attrs else dim // parts
        if "num_outputs" not in attrs and dim % parts:
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
    attrs = current_attrs(node)
    if "starts" not in attrs:
        return Fail("slice bounds are computed at run time")
    if x.shape is None:
        return Fail(f"shape of {x.name!r} is unknown")
    axes, starts, ends, steps = [], [], [], []
    for axis, start, end, step in zip(*(attrs[k] for k in ("axes", "starts", "ends", "steps")), strict=True):
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
    attrs = current_attrs(node)
    axes = attrs.get("axes")
    if axes is None and node.op == Op.SQUEEZE and len(node.inputs) == 1 and x.shape is not None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
        if any(not isinstance(d, int) for d in x.shape):
            return Fail(f"which dims of {x.name!r} are 1 is not known statically")
    if axes is None:
        return Fail("axes are computed at run time")
    folded = {"axes": tuple(axes)}
    if node.op == Op.REDUCE_MEAN:
        folded["keepdims"] = node.attrs.get("keepdims", True)
    return match.with_info(attrs=folded)


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
