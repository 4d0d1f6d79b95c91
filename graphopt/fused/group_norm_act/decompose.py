"""GroupNormAct's fallback body: standard ops in X's element type, any opset from 13.

The spelling both torch exporters write, which ONNX Runtime runs at the original's cost: X viewed as
[N, groups, C / groups * S] (Reshape with 0 copying a dim, so the body needs neither the rank nor C),
normalized by InstanceNormalization over that last axis (float32 statistics whatever X's type) with
unit scale and zero shift per group, viewed back as [N, C, S], scaled and shifted per channel ([C, 1]
views), activated and reshaped to X's shape. The statistics spelled out in ReduceMean, Sub, Mul, Sqrt and
Div took 1.3x as long on ONNX Runtime's CPU EP (two group norms + SiLU of [4, 128, 32, 32]); casts to
float32 around the ops took 1.3x the original's time on its CUDA EP in fp16 (a diffusion UNet and VAE
decoder, bench/results/2026-11-28-h200d/without_library). ONNX's GroupNormalization is not used: before
opset 21 it scales per group, not per channel.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from graphopt.fused.onnx_decompose import Body, activate, normalized_input


def body(b: Body) -> list[str]:
    v = b.variant
    groups = v.attr("groups")
    b.compute_in_input_type()
    s, outputs = normalized_input(b)
    rows = b.op("Reshape", s, b.ints([0, 0, -1]))
    grouped = b.op("Reshape", rows, b.ints([0, groups, -1]))
    ones, zeros = (
        b.from_float(
            b.op("Constant", value=helper.make_tensor(name, TensorProto.FLOAT, [groups], [value] * groups))
        )
        for name, value in (("ones", 1.0), ("zeros", 0.0))
    )
    normed = b.op("InstanceNormalization", grouped, ones, zeros, epsilon=v.attr("epsilon"))
    y = b.op("Reshape", normed, b.op("Shape", rows))
    per_channel = b.ints([-1, 1])
    if "Scale" in v.present:
        y = b.op("Mul", y, b.op("Reshape", b.to_compute("Scale"), per_channel))
    if "Bias" in v.present:
        y = b.op("Add", y, b.op("Reshape", b.to_compute("Bias"), per_channel))
    y = b.op("Reshape", activate(b, v.attr("activation"), y), b.op("Shape", "X"))
    b.back_to_input_type(y, "Y")
    return outputs
