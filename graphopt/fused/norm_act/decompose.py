"""NormAct's fallback body: float32 norm and activation, the residual sum rounded to X's type."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activate, normalize, normalized_input, optional_float


def body(b: Body) -> list[str]:
    v = b.variant
    s, outputs = normalized_input(b)
    scale, bias = optional_float(b, "Scale"), optional_float(b, "Bias")
    y = activate(b, v.attr("activation"), normalize(b, s, scale, bias, v.attr("axis")))
    b.back_to_input_type(y, "Y")
    return outputs
