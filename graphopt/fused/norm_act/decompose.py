"""NormAct's fallback body: the norm and activation (in X's type where a standard op normalizes, else in
float32), the residual sum rounded to X's type."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import (
    Body,
    activate,
    has_norm_op,
    normalize,
    normalized_input,
    optional_operand,
)


def body(b: Body) -> list[str]:
    v = b.variant
    if has_norm_op(v):
        b.compute_in_input_type()
    s, outputs = normalized_input(b)
    scale, bias = optional_operand(b, "Scale"), optional_operand(b, "Bias")
    y = activate(b, v.attr("activation"), normalize(b, s, scale, bias, v.attr("axis")))
    b.back_to_input_type(y, "Y")
    return outputs
