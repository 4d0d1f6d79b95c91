"""Evaluating one ONNX node on constant inputs, with ONNX's reference implementation (constant folding)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from ..ir import Node

# Ops whose result differs from run to run (or that the reference runs differently from runtimes).
_NONDETERMINISTIC = {
    "Multinomial",
    "Bernoulli",
    "Dropout",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
}
_NONDETERMINISTIC |= {"RandomUniformLike"}
# Quantization ops stay as written: a DequantizeLinear of a quantized weight is half of a QDQ node unit
# that runtimes (ONNX Runtime, TensorRT, QNN) turn into one integer kernel (QLinearMatMul, QLinearConv);
# folded, the weight is stored in float (4x the bytes) and the runtime runs the float op instead.
_QUANTIZATION = {"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear"}


def evaluate_onnx_node(node: Node, arrays: list[np.ndarray | None]) -> list[np.ndarray] | None:
    proto: onnx.NodeProto = node.source
    if proto.op_type in _NONDETERMINISTIC | _QUANTIZATION or proto.domain not in ("", "ai.onnx"):
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in proto.attribute):
        return None
    copy = onnx.NodeProto()
    copy.CopyFrom(proto)
    del copy.input[:]
    copy.input.extend(f"in{i}" if a is not None else "" for i, a in enumerate(arrays))
    del copy.output[:]
    copy.output.extend(f"out{i}" if name else "" for i, name in enumerate(proto.output))
    feeds = {f"in{i}": a for i, a in enumerate(arrays) if a is not None}
    opset = node.graph.meta.get("opset", {}).get("", None) if node.graph is not None else None
    evaluator = ReferenceEvaluator(copy, opsets={"": opset} if opset else None)
    results = evaluator.run(None, feeds)
    return [np.asarray(r) for r in results]
