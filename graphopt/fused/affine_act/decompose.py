"""AffineAct's ONNX fallback body: standard ops in X's element type (as the unfused graph computes:
a batch norm or a bias add, then the activation), for one attribute combination.

Scale and Bias are [C] vectors: for a channel axis counted from the end the body reshapes them
to [C, 1, ...] with a constant shape; for one counted from the front it reads the number of trailing
dims from X's shape at run time, since a function body does not know X's rank.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from graphopt.fused.onnx_decompose import Body, activate

INT64_MAX = (1 << 63) - 1


def _trailing_ones(body, axis: int) -> str:
    """The shape [-1, 1, ..., 1] that puts a [C] vector on dimension ``axis`` (>= 0) of X."""
    dims_after = body.op("Slice", body.op("Shape", "X"), body.ints([axis + 1]), body.ints([INT64_MAX]))
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    ones = body.op("ConstantOfShape", body.op("Shape", dims_after), value=one)
    return body.op("Concat", body.ints([-1]), ones, axis=0)


def _on_channel(body, vector: str, axis: int) -> str:
    if axis == -1:
        return vector
    shape = body.ints([-1] + [1] * (-axis - 1)) if axis < 0 else _trailing_ones(body, axis)
    return body.op("Reshape", vector, shape)


def body(b: Body) -> list[str]:
    """Appends ``Y = act(X * Scale + Bias)``; returns the outputs."""
    v = b.variant
    axis = v.attr("axis")
    b.compute_in_input_type()
    z = b.to_compute("X")
    if "Scale" in v.present:
        z = b.op("Mul", z, _on_channel(b, b.to_compute("Scale"), axis))
    if "Bias" in v.present:
        z = b.op("Add", z, _on_channel(b, b.to_compute("Bias"), axis))
    b.back_to_input_type(activate(b, v.attr("activation"), z), "Y")
    return ["Y"]
