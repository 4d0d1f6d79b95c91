"""ONNX Runtime's transformer optimizer on the same ONNX files, and which of its fusions graphopt matches.

ORT's fusions that graphopt has an op for are the norms: every LayerNormalization or
SimplifiedLayerNormalization
ORT ends with is a norm graphopt must also see (as a ``layer_norm``/``rms_norm``, or inside a fused op), and
every SkipLayerNormalization / SkipSimplifiedLayerNormalization (a residual add folded into the norm) must be
a ``NormAct`` with a residual input in graphopt's result. ORT's other fusions (attention, BiasGelu, FastGelu,
EmbedLayerNormalization, ...) have no graphopt op; they are listed for reference.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

NORMS = ("LayerNormalization", "SimplifiedLayerNormalization")
SKIP_NORMS = ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
BIAS_ACTS = ("BiasGelu", "FastGelu")  # (graphopt's op for these: graphopt.AffineAct)
# (graphopt's op for these: graphopt.GroupNormAct; ORT's skip may broadcast, [N, C] over the pixels)
GROUP_NORMS, SKIP_GROUP_NORMS = ("GroupNorm",), ("SkipGroupNorm",)


def ort_fusions(path: Path, model_type: str, options: dict) -> dict[str, Any]:
    """Runs ORT's transformer optimizer (its Python fusions only: opt_level 0) and counts its fused ops.
    Where the model's own type fails (its attention fusion expects another exporter's graph), the generic
    "bert" fusions, which include every norm fusion, run instead and the result says so."""
    try:
        return _ort_fusions(path, model_type, options)
    except Exception as error:
        if model_type == "bert":
            raise
        result = _ort_fusions(path, "bert", options)
        result["model_type"] = f"bert (as {model_type}: {type(error).__name__})"
        return result


def _ort_fusions(path: Path, model_type: str, options: dict) -> dict[str, Any]:
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(path),
        model_type=model_type,
        num_heads=options.get("num_heads", 0),
        hidden_size=options.get("hidden_size", 0),
        opt_level=0,
    )
    ops = Counter(node.op_type for node in optimized.model.graph.node)
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    return {
        "model_type": model_type,
        "norms": sum(ops[o] for o in NORMS + SKIP_NORMS),
        "constant_norms": _constant_norms(optimized.model.graph),
        "skip_norms": sum(ops[o] for o in SKIP_NORMS),
        "bias_acts": sum(ops[o] for o in BIAS_ACTS),
        "group_norms": sum(ops[o] for o in GROUP_NORMS + SKIP_GROUP_NORMS),
        "skip_group_norms": sum(ops[o] for o in SKIP_GROUP_NORMS),
        "fused": fused,
    }


def _constant_norms(graph) -> int:
    """Norms of constants (DeBERTa's relative position embeddings): ORT's optimizer keeps them, graphopt
    computes them once while optimizing, so they are no norm graphopt missed."""
    constant = {t.name for t in graph.initializer}
    count = 0
    for node in graph.node:  # (in topological order)
        if all(name in constant for name in node.input if name):
            constant.update(node.output)
            count += node.op_type in NORMS
    return count


def graphopt_norms(ops_after: dict[str, int], optimized_graph, rule_counts: dict[str, int]) -> dict[str, int]:
    """Norms graphopt ended with (its op counts before writing, since an opset without RMSNormalization
    gets a norm written out in elementwise ops; a recognized norm that no fusion took is given back as
    the model wrote it, so ``restore_unfused``'s counts add those), and how many of its NormActs carry a
    residual add."""
    from graphopt.ir import Op

    norms = sum(ops_after.get(op, 0) for op in (Op.LAYER_NORM, Op.RMS_NORM, Op.NORM_ACT, Op.NORM_ACT_LINEAR))
    norms += sum(rule_counts.get(f"restore[{op}]", 0) for op in (Op.LAYER_NORM, Op.RMS_NORM))
    # (the residual: NormAct's input 3; NormActLinear's input 5, when a norm with its residual add was
    # fused further with the linear layer after it)
    residual = {Op.NORM_ACT: 3, Op.NORM_ACT_LINEAR: 5}
    skip = sum(
        1
        for node in optimized_graph
        if node.op in residual
        and len(node.inputs) > residual[node.op]
        and node.input(residual[node.op]) is not None
    )
    groups = ops_after.get(Op.GROUP_NORM_ACT, 0) + ops_after.get(Op.GROUP_NORM, 0)
    groups += rule_counts.get(f"restore[{Op.GROUP_NORM}]", 0)
    group_skip = sum(1 for n in optimized_graph if n.op == Op.GROUP_NORM_ACT and n.input(3) is not None)
    return {
        "norms": norms,
        "skip_norms": skip,
        "bias_acts": ops_after.get(Op.AFFINE_ACT, 0),
        "group_norms": groups,
        "skip_group_norms": group_skip,
    }


def compare(ort: dict[str, Any], ours: dict[str, int]) -> dict[str, Any]:
    """graphopt must see at least ORT's norms (but those of constants, which it computes once), fold at
    least ORT's residual adds and fuse at least ORT's bias + GELU (BiasGelu, FastGelu) as AffineAct; and
    see its group norms and fold as many adds into them (SkipGroupNorm) as GroupNormAct residuals."""
    checks = {
        "norms_ok": ours["norms"] >= ort["norms"] - ort.get("constant_norms", 0),
        "skip_norms_ok": ours["skip_norms"] >= ort["skip_norms"],
        "bias_acts_ok": ours.get("bias_acts", 0) >= ort.get("bias_acts", 0),
        "group_norms_ok": ours.get("group_norms", 0) >= ort.get("group_norms", 0),
        "skip_group_norms_ok": ours.get("skip_group_norms", 0) >= ort.get("skip_group_norms", 0),
    }
    return {**checks, "ok": all(checks.values())}
