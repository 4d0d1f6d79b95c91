"""GroupNormAct's fallback body: standard ops, float32 statistics, any opset from 13.

X is viewed as [N, C, S] and then [N, groups, C / groups * S] (Reshape with 0 copying a dim, so the
body needs neither the rank nor C), normalized by ReduceMean statistics, viewed back as [N, C, S]
for the per-channel Scale and Bias ([C, 1] views), activated and reshaped to X's shape.
ONNX's GroupNormalization is not used: before opset 21 it scales per group, not per channel.
"""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activate, normalized_input


def body(b: Body) -> list[str]:
    v = b.variant
    s, outputs = normalized_input(b)
    rows = b.op("Reshape", s, b.ints([0, 0, -1]))
    grouped = b.op("Reshape", rows, b.ints([0, v.attr("groups"), -1]))
    centered = b.op("Sub", grouped, b.reduce_mean(grouped, (2,)))
    variance = b.reduce_mean(b.op("Mul", centered, centered), (2,))
    std = b.op("Sqrt", b.op("Add", variance, b.const(v.attr("epsilon"))))
    y = b.op("Reshape", b.op("Div", centered, std), b.op("Shape", rows))
    per_channel = b.ints([-1, 1])
    if "Scale" in v.present:
        y = b.op("Mul", y, b.op("Reshape", b.to_float("Scale"), per_channel))
    if "Bias" in v.present:
        y = b.op("Add", y, b.op("Reshape", b.to_float("Bias"), per_channel))
    y = b.op("Reshape", activate(b, v.attr("activation"), y), b.op("Shape", "X"))
    b.back_to_input_type(y, "Y")
    return outputs
