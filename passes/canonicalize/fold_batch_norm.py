"""fold_batch_norm: an inference batch norm after a conv or a linear becomes the conv's own weights.

In inference a batch norm is a per-channel affine map, ``y = (x - mean) * s + beta`` with
``s = gamma / sqrt(var + eps)``, and a conv (any number of spatial dims, any groups) or a linear is
linear in its weights per output channel: scaling output channel ``c``'s weights by ``s[c]`` and
taking ``(bias - mean) * s + beta`` as the bias computes the same thing in one op. Both ONNX exporters
do this while exporting; torch.export keeps ``conv2d → _native_batch_norm_legit_no_training`` (20 in
ResNet-18), and each batch norm is a full read and write of the activations.

The new weights are computed in float64 from the original ones and cast to the weight's dtype. The
conv itself is not rebuilt: its weight and bias inputs are pointed at the new tensors (a bias-less
conv's empty bias slot is filled), so the backend writes the same call with other tensors. Each new
tensor records the weight it was derived from (ir.provenance), so the torch backend keeps it a parameter,
named after that weight.

Conditions (a near miss names the one that failed): the batch norm is in inference mode with constant
statistics (and affine weights, where it has them), only its normalized output is read, the conv's
(or linear's) output has no other reader, its weight and bias are constants, and the batch norm's
channel axis (1) is the axis the conv or linear writes its output channels to.
"""

from __future__ import annotations

import numpy as np

from graphopt.ir import Graph, Node, Op, Tensor, Value, constant_of, opaque_name
from graphopt.ir.provenance import record_origins
from graphopt.rewrite import Fail, NearMiss, Pass, RewriteStats, count_rewrite, may_rewrite

from .batch_norms import BATCH_NORMS, batch_norm_affine

# Opaque ops the torch.export frontend reads with fixed input slots and attributes (aten_slots):
# (x, weight, bias) with ``transposed``; (x, weight, bias, running_mean, running_var) with ``training``
# and ``eps``.
CONVOLUTIONS = frozenset(
    opaque_name("aten", name)
    for name in (
        "conv1d.default",
        "conv2d.default",
        "conv3d.default",
        "conv1d.padding",
        "conv2d.padding",
        "conv3d.padding",
        "convolution.default",
        "_convolution.default",
    )
)

INTO_CONV = "fold_batch_norm_into_conv"
INTO_LINEAR = "fold_batch_norm_into_linear"


class _Miss(Exception):
    pass


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for norm in graph.nodes_of(BATCH_NORMS):
        if norm not in graph:
            continue
        producer = norm.input(0).producer if norm.input(0) is not None else None
        rule = INTO_CONV if producer is not None and producer.op in CONVOLUTIONS else INTO_LINEAR
        if producer is None or producer.op not in (*CONVOLUTIONS, Op.LINEAR, Op.MATMUL):
            continue  # (a batch norm after anything else needs a fused op, not a fold)
        try:
            scale, shift = _affine(norm)
            _only_reader(graph, norm.input(0), norm)
            if not may_rewrite():
                break
            if rule == INTO_CONV:
                folded = _into_conv(graph, producer, scale, shift)
            else:
                folded = _into_linear(graph, producer, scale, shift)
        except _Miss as miss:
            stats.near_misses.append(NearMiss(rule, norm.name, str(miss)))
            continue
        graph.replace_all_uses(norm.output, folded)
        graph.erase(norm)
        if producer in graph and not any(graph.is_used(v) for v in producer.outputs):
            graph.erase(producer)
        stats.counts[rule] += 1
        count_rewrite(rule, norm.name)
    return stats


def _affine(norm: Node) -> tuple[np.ndarray, np.ndarray]:
    """The batch norm's per-channel ``(s, beta - mean * s)``, in float64."""
    affine = batch_norm_affine(norm)
    if isinstance(affine, Fail):
        raise _Miss(affine.reason)
    return affine


def _only_reader(graph: Graph, value: Value, norm: Node) -> None:
    if graph.is_output(value) or value.users() != [norm]:
        raise _Miss(f"{value.name!r} is read by more than {norm.name!r}")


def _weights(node: Node, weight: Value | None, bias: Value | None) -> tuple[Tensor, Tensor | None]:
    tensor = constant_of(weight) if weight is not None else None
    if tensor is None:
        raise _Miss(f"the weight of {node.name!r} is not a constant")
    bias_tensor = constant_of(bias) if bias is not None else None
    if bias is not None and bias_tensor is None:
        raise _Miss(f"the bias of {node.name!r} is not a constant")
    return tensor, bias_tensor


def _into_conv(graph: Graph, conv: Node, scale: np.ndarray, shift: np.ndarray) -> Value:
    if conv.attrs.get("transposed") is not False:
        raise _Miss(f"{conv.name!r} is not known to be a plain (not transposed) convolution")
    weight, bias = _weights(conv, conv.input(1), conv.input(2))
    if weight.shape[0] != len(scale):
        raise _Miss(f"{conv.name!r} writes {weight.shape[0]} channels, the batch norm {len(scale)}")
    spatial = (1,) * (len(weight.shape) - 1)
    new_weight = weight.numpy().astype(np.float64) * scale.reshape(-1, *spatial)
    old_bias = bias.numpy().astype(np.float64) if bias is not None else 0.0
    new_bias = old_bias * scale + shift
    if len(conv.inputs) < 3:
        raise _Miss(f"{conv.name!r} has no bias slot to fill")
    conv.replace_input_with(1, _constant(graph, new_weight, weight.dtype, conv.input(1), INTO_CONV))
    original = conv.input(2) or conv.input(1)
    conv.replace_input_with(2, _constant(graph, new_bias, (bias or weight).dtype, original, INTO_CONV))
    return conv.output


def _into_linear(graph: Graph, node: Node, scale: np.ndarray, shift: np.ndarray) -> Value:
    """``linear(x, W [K, D], b)`` and ``matmul(x, W [D, K])`` with a 2-D ``x``: the batch norm's
    channels are the output features only when the output is [N, K]."""
    if node.output.rank != 2:
        raise _Miss(f"{node.name!r}'s output is not [N, features]: channel axis 1 is not its features")
    if node.op == Op.MATMUL:
        weight, _ = _weights(node, node.input(1), None)
        if len(weight.shape) != 2:
            raise _Miss(f"the weight of {node.name!r} is not a matrix")
        new_weight = weight.numpy().astype(np.float64) * scale.reshape(1, -1)
        w = _constant(graph, new_weight, weight.dtype, node.input(1), INTO_LINEAR)
        product = graph.add_node(Op.MATMUL, [node.input(0), w], {}, name=graph.fresh_name(node.name))
        b = _constant(graph, shift, weight.dtype, node.input(1), INTO_LINEAR)
        added = graph.add_node(Op.ADD, [product.output, b], {}, name=graph.fresh_name(f"{node.name}/bias"))
        for made in (product, added):
            made.meta["rule"] = INTO_LINEAR
        return added.output
    weight, bias = _weights(node, node.input(1), node.input(2))
    new_weight = weight.numpy().astype(np.float64) * scale.reshape(-1, 1)
    old_bias = bias.numpy().astype(np.float64) if bias is not None else 0.0
    w = _constant(graph, new_weight, weight.dtype, node.input(1), INTO_LINEAR)
    original = node.input(2) or node.input(1)
    b = _constant(graph, old_bias * scale + shift, (bias or weight).dtype, original, INTO_LINEAR)
    linear = graph.add_node(Op.LINEAR, [node.input(0), w, b], {}, name=graph.fresh_name(node.name))
    linear.meta["rule"] = INTO_LINEAR
    return linear.output


def _constant(graph: Graph, array: np.ndarray, dtype, original: Value, rule: str) -> Value:
    tensor = Tensor.from_array(array.astype(dtype.numpy), dtype)
    value = graph.add_constant(tensor, graph.fresh_name(f"{original.name}_folded"))
    value.meta["rule"] = rule
    record_origins(value, [original])
    return value


PASS = Pass(
    "fold_batch_norm",
    "Fold an inference batch norm into the conv or linear before it (new weights, no batch norm).",
    run,
)
