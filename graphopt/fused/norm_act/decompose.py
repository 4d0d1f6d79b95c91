"""NormAct's fallback body: the norm and activation (in X's type where a standard op normalizes, else in
float32), the residual sum rounded to X's type."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activated_norm


def body(b: Body) -> list[str]:
    y, outputs = activated_norm(b, b.variant.attr("axis"))
    b.back_to_input_type(y, "Y")
    return outputs
