"""GroupNormAct's fallback body: standard ops, float32 statistics, any opset from 13.

X is viewed as [N, groups, C / groups * S] (Reshape with 0 copying a dim, so the body needs neither the
rank nor C), less each group's first element, and normalized by InstanceNormalization over that last
axis, with unit scale and zero shift per group: the spelling both torch exporters write, which ONNX
Runtime runs as one kernel (the statistics spelled out in ReduceMean, Sub, Mul, Sqrt and Div took 1.3x
as long on its CPU EP, two group norms + SiLU of [4, 128, 32, 32]). Viewed
back as [N, C, S], it is scaled and shifted per channel ([C, 1] views), activated and reshaped to X's
shape. ONNX's GroupNormalization is not used: before opset 21 it scales per group, not per channel.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from graphopt.fused.onnx_decompose import Body, activate, normalized_input


def body(b: Body) -> list[str]:
    v = b.variant
    groups = v.attr("groups")
    s, outputs = normalized_input(b)
    rows = b.op("Reshape", s, b.ints([0, 0, -1]))
    grouped = b.op("Reshape", rows, b.ints([0, groups, -1]))
    # Each group less its first element: InstanceNormalization's float32 statistics of values far from
    # zero lose the digits their spread is in (an offset of 1e4: errors of 1e-3); differences from a
    # value of the group are exact where they are small, as the fused kernels' pivot makes them.
    pivot = b.op("Slice", grouped, b.ints([0]), b.ints([1]), b.ints([2]))
    grouped = b.op("Sub", grouped, pivot)
    ones, zeros = (
        b.op("Constant", value=helper.make_tensor(name, TensorProto.FLOAT, [groups], [value] * groups))
        for name, value in (("ones", 1.0), ("zeros", 0.0))
    )
    normed = b.op("InstanceNormalization", grouped, ones, zeros, epsilon=v.attr("epsilon"))
    y = b.op("Reshape", normed, b.op("Shape", rows))
    per_channel = b.ints([-1, 1])
    if "Scale" in v.present:
        y = b.op("Mul", y, b.op("Reshape", b.to_float("Scale"), per_channel))
    if "Bias" in v.present:
        y = b.op("Add", y, b.op("Reshape", b.to_float("Bias"), per_channel))
    y = b.op("Reshape", activate(b, v.attr("activation"), y), b.op("Shape", "X"))
    b.back_to_input_type(y, "Y")
    return outputs
