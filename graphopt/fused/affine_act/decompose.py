"""AffineAct's ONNX fallback body: standard ops, float32 arithmetic, for one attribute combination.

``build(body, activate)`` appends the nodes to ``body`` (``graphopt.fused.onnx_decompose``'s body
builder, whose variant says the activation, the axis and which of Scale and Bias are present) and
applies the activation with ``activate(body, kind, value)``, the decomposition the other fused ops
share. Scale and Bias are [C] vectors: for a channel axis counted from the end the body reshapes them
to [C, 1, ...] with a constant shape; for one counted from the front it reads the number of trailing
dims from X's shape at run time, since a function body does not know X's rank.
"""

from __future__ import annotations

from onnx import TensorProto, helper

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


def build(body, activate) -> list[str]:
    """Appends ``Y = act(float(X) * Scale + Bias)`` cast back to X's type; returns the outputs."""
    v = body.variant
    z = body.to_float("X")
    if "Scale" in v.present:
        z = body.op("Mul", z, _on_channel(body, body.to_float("Scale"), v.axis))
    if "Bias" in v.present:
        z = body.op("Add", z, _on_channel(body, body.to_float("Bias"), v.axis))
    body.back_to_input_type(activate(body, v.activation, z), "Y")
    return ["Y"]
