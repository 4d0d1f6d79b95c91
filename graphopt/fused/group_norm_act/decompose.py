"""The ONNX fallback body of GroupNormAct: standard ops, float32 statistics, any opset from 13.

X is viewed as [N, C, S] and then [N, groups, C / groups * S] (Reshape with 0 copying a dim, so the
body needs neither the rank nor C), normalized by ReduceMean statistics, viewed back as [N, C, S]
for the per-channel Scale and Bias ([C, 1] views), activated and reshaped to X's shape.
ONNX's GroupNormalization is not used: before opset 21 it scales per group, not per channel.
"""

from __future__ import annotations


def group_norm_act_body(body, activation_body) -> list[str]:
    """Appends the body of ``body.variant`` to ``body`` (an ``onnx_decompose`` body builder);
    ``activation_body(body, kind, z)`` spells the activation. Returns the outputs produced."""
    v = body.variant
    s = body.to_float("X")
    outputs = ["Y"]
    if "Residual" in v.present:
        # Rounded to storage precision and normalized from there, as the unfused graph would.
        s = body.back_to_input_type(body.op("Add", s, body.to_float("Residual")), "ResidualSum")
        if "ResidualSum" in v.present:
            outputs.append("ResidualSum")
        s = body.to_float(s)
    rows = body.op("Reshape", s, body.ints([0, 0, -1]))
    grouped = body.op("Reshape", rows, body.ints([0, v.groups, -1]))
    centered = body.op("Sub", grouped, body.reduce_mean(grouped, (2,)))
    variance = body.reduce_mean(body.op("Mul", centered, centered), (2,))
    std = body.op("Sqrt", body.op("Add", variance, body.const(v.epsilon)))
    y = body.op("Reshape", body.op("Div", centered, std), body.op("Shape", rows))
    per_channel = body.ints([-1, 1])
    if "Scale" in v.present:
        y = body.op("Mul", y, body.op("Reshape", body.to_float("Scale"), per_channel))
    if "Bias" in v.present:
        y = body.op("Add", y, body.op("Reshape", body.to_float("Bias"), per_channel))
    y = body.op("Reshape", activation_body(body, v.activation, y), body.op("Shape", "X"))
    body.back_to_input_type(y, "Y")
    return outputs
