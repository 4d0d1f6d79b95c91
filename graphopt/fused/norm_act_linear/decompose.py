"""NormActLinear's fallback body: the norm and activation, then MatMul with the transposed weight."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activate, normalize, optional_float


def body(b: Body) -> list[str]:
    v = b.variant
    scale, bias = optional_float(b, "Scale"), optional_float(b, "Bias")
    hidden = activate(b, v.attr("activation"), normalize(b, b.to_float("X"), scale, bias, -1))
    weight_t = b.op("Transpose", b.to_float("Weight"), perm=[1, 0])
    y = b.op("MatMul", hidden, weight_t)
    if "LinearBias" in v.present:
        y = b.op("Add", y, b.to_float("LinearBias"))
    b.back_to_input_type(activate(b, v.attr("out_activation"), y), "Y")
    return ["Y"]
