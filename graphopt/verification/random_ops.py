"""Ops whose outputs change from run to run on the same inputs (random draws, dropout in training mode).

No optimized model can match the outputs of a model that has them, so the numeric check refuses such a
model up front with what it found and what to do (export it in eval mode, or skip the check), rather
than report a mismatch that changes from one try to the next. ONNX ops with a ``seed`` attribute draw
the same values in every fresh session, and are kept.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from ..ir import constant_of

ONNX_RANDOM = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)
# aten ops by name without overload; their in-place forms end in "_". Dropout is random only in training.
ATEN_RANDOM = frozenset(
    {"bernoulli", "multinomial", "normal", "poisson", "rand", "rand_like", "randint", "randint_like", "randn"}
    | {"randn_like", "randperm", "uniform", "exponential", "geometric", "log_normal", "cauchy", "random"}
)
ATEN_DROPOUT = frozenset(
    {"dropout", "native_dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}
)


def random_ops(source) -> list[str]:
    """``"op at node 'name'"`` for each random op of a loaded model (``model_files.Source``): for ONNX
    read from its graph, whose nodes of ops it does not know keep their protos (subgraphs included), for
    torch from the exported program."""
    if source.frontend != "onnx":
        return [
            f"aten.{_aten_name(n)} at node {n.name!r}" for n in _fx_nodes(source.original) if _aten_random(n)
        ]
    found = []
    for node in source.graph.nodes:
        proto = getattr(node, "source", None)
        if not isinstance(proto, onnx.NodeProto):
            continue
        mode = node.input(2) if proto.op_type == "Dropout" and len(node.inputs) > 2 else None
        if _onnx_random(proto, None if mode is None else constant_of(mode)):
            found.append(f"{proto.op_type} at node {proto.name!r}")
        found += [f"{n.op_type} at node {n.name!r}" for n in _inside(proto) if _onnx_random(n, None)]
    return found


def _inside(node: onnx.NodeProto) -> Iterator[onnx.NodeProto]:
    """The nodes of ``node``'s subgraphs, at any depth."""
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs:
            for inner in graph.node:
                yield inner
                yield from _inside(inner)


def _onnx_random(node: onnx.NodeProto, mode) -> bool:
    """Whether ``node`` draws at random; for Dropout, ``mode`` is its training_mode's constant value
    (None: unknown, and then it may be on wherever the node has that input)."""
    if node.domain not in ("", "ai.onnx") or any(a.name == "seed" for a in node.attribute):
        return False
    if node.op_type in ONNX_RANDOM:
        return True
    if node.op_type != "Dropout" or len(node.input) < 3 or not node.input[2]:
        return False
    return mode is None or bool(mode.numpy().any())


def _fx_nodes(program) -> Iterator:
    for module in program.graph_module.modules():
        graph = getattr(module, "graph", None)
        if graph is not None:
            yield from (n for n in graph.nodes if n.op == "call_function")


def _aten_name(node) -> str:
    schema = getattr(node.target, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None and schema.name.startswith("aten::") else ""


def _aten_random(node) -> bool:
    name = _aten_name(node).removesuffix("_")
    if name in ATEN_RANDOM:
        return True
    if name not in ATEN_DROPOUT:
        return False
    train = node.kwargs.get("train", node.args[2] if len(node.args) > 2 else True)
    return train is not False
