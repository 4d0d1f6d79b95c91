"""fold_onnx_batch_norm: an ONNX ``BatchNormalization`` after a ``Conv`` becomes the conv's own weights.

The ONNX counterpart of ``fold_batch_norm`` (which reads torch.export's aten ops): both ONNX exporters
fold a conv's batch norm themselves in eval mode, but models exported in training mode, with constant
folding off, or by other tools keep ``Conv → BatchNormalization``. Output channel ``c`` of the conv is
scaled by ``s[c] = gamma[c] / sqrt(var[c] + eps)`` and its bias becomes ``(bias - mean) * s + beta``,
computed in float64 and stored in the conv's weight type. A conv without a bias is written again with
one (the same node, one more input).

Conditions (a near miss names the one that failed): the batch norm is in inference mode with constant
statistics and weights, only its first output is read, the conv's output has no other reader, and the
conv's weight (and bias, where it has one) are constants with one output channel per batch-norm channel.
"""

from __future__ import annotations

import numpy as np

from graphopt.ir import Graph, Node, Tensor, Value, constant_of, opaque_name
from graphopt.ir.provenance import record_origins
from graphopt.rewrite import Fail, NearMiss, Pass, RewriteStats, count_rewrite, may_rewrite

from .batch_norms import ONNX_BATCH_NORM, batch_norm_affine

ONNX_CONV = opaque_name("onnx", "Conv")
RULE = "fold_onnx_batch_norm_into_conv"


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for norm in graph.nodes_of(ONNX_BATCH_NORM):
        x = norm.input(0)
        conv = x.producer if x is not None else None
        if norm not in graph or conv is None or conv.op != ONNX_CONV:
            continue
        if not may_rewrite():
            break
        folded = _fold(graph, norm, conv)
        if isinstance(folded, Fail):
            stats.near_misses.append(NearMiss(RULE, norm.name, folded.reason))
            continue
        weight, bias = folded
        replacement = _conv_with(graph, conv, weight, bias)
        graph.replace_all_uses(norm.output, replacement.output)
        graph.erase(norm)
        graph.erase(conv)
        stats.counts[RULE] += 1
        count_rewrite(RULE, norm.name)
    return stats


def _fold(graph: Graph, norm: Node, conv: Node) -> tuple[Value, Value] | Fail:
    """The conv's new weight and bias constants, or why the batch norm cannot be folded."""
    affine = batch_norm_affine(norm)
    if isinstance(affine, Fail):
        return affine
    scale, shift = affine
    if graph.is_output(conv.output) or conv.output.users() != [norm]:
        return Fail(f"{conv.output.name!r} is read by more than {norm.name!r}")
    weight = constant_of(conv.input(1)) if conv.input(1) is not None else None
    if weight is None:
        return Fail(f"the weight of {conv.name!r} is not a constant")
    bias_value = conv.input(2) if len(conv.inputs) > 2 else None
    bias = constant_of(bias_value) if bias_value is not None else None
    if bias_value is not None and bias is None:
        return Fail(f"the bias of {conv.name!r} is not a constant")
    if weight.shape[0] != len(scale):
        return Fail(f"{conv.name!r} writes {weight.shape[0]} channels, the batch norm {len(scale)}")
    spatial = (1,) * (len(weight.shape) - 1)
    new_weight = weight.numpy().astype(np.float64) * scale.reshape(-1, *spatial)
    old_bias = bias.numpy().astype(np.float64) if bias is not None else 0.0
    sources = [conv.input(1), bias_value, *norm.inputs[1:5]]
    return (
        _constant(graph, new_weight, weight.dtype, conv.input(1), sources),
        _constant(
            graph, old_bias * scale + shift, (bias or weight).dtype, bias_value or conv.input(1), sources
        ),
    )


def _conv_with(graph: Graph, conv: Node, weight: Value, bias: Value) -> Node:
    """The same ONNX Conv node reading the new weight and bias (a third input where it had none)."""
    out = conv.output
    replacement = graph.add_node(
        conv.op,
        [conv.input(0), weight, bias],
        {},
        outputs=[(graph.fresh_name(out.name), out.dtype, out.shape)],
        name=graph.fresh_name(conv.name),
    )
    replacement.source = conv.source
    replacement.meta.update(conv.meta)
    replacement.meta["explicit_inputs"] = 3
    replacement.meta["omitted_outputs"] = []
    replacement.meta["rule"] = RULE
    return replacement


def _constant(graph: Graph, array: np.ndarray, dtype, named_after: Value, sources) -> Value:
    tensor = Tensor.from_array(array.astype(dtype.numpy), dtype)
    value = graph.add_constant(tensor, graph.fresh_name(f"{named_after.name}_folded"))
    value.meta["rule"] = RULE
    record_origins(value, [s for s in sources if s is not None])
    return value


PASS = Pass(
    "fold_onnx_batch_norm",
    "Fold an ONNX BatchNormalization into the Conv before it (new weights, no batch norm).",
    run,
)
