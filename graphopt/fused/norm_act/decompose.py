"""NormAct's fallback body: float32 norm and activation, the residual sum rounded to X's type."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activate, normalize, optional_float


def body(b: Body) -> list[str]:
    v = b.variant
    s = b.to_float("X")
    outputs = ["Y"]
    if "Residual" in v.present:
        # Rounded to storage precision and normalized from there, as the unfused graph would.
        s = b.back_to_input_type(b.op("Add", s, b.to_float("Residual")), "ResidualSum")
        if "ResidualSum" in v.present:
            outputs.append("ResidualSum")
        s = b.to_float(s)
    scale, bias = optional_float(b, "Scale"), optional_float(b, "Bias")
    y = activate(b, v.attr("activation"), normalize(b, s, scale, bias, v.attr("axis")))
    b.back_to_input_type(y, "Y")
    return outputs
