"""NormActLinear's fallback body: the norm and activation (of X + Residual, rounded to X's type,
where there is one), then MatMul with the weight's matrices transposed."""

from __future__ import annotations

from graphopt.fused.onnx_decompose import Body, activate, activated_norm


def body(b: Body) -> list[str]:
    v = b.variant
    hidden, outputs = activated_norm(b, -1)
    # (the last two dims swapped whatever the weight's rank: [K, D] or one matrix per slice; MatMul
    # then broadcasts the slices as the batched matmul it replaced did)
    # (Einsum in float32, which every runtime has it for; the weight is small)
    weight_t = b.op("Einsum", b.to_float("Weight"), equation="...kd->...dk")
    y = b.op("MatMul", hidden, b.from_float(weight_t))
    if "LinearBias" in v.present:
        y = b.op("Add", y, b.to_compute("LinearBias"))
    b.back_to_input_type(activate(b, v.attr("out_activation"), y), "Y")
    return outputs
