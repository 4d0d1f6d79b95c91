"""ONNX-domain ops that ONNX Runtime runs but ONNX has no schema for, kept out of the checker's way.

ONNX Runtime registers a few of its contrib ops in the default domain (``SimplifiedLayerNormalization``,
which its transformer optimizer writes into every LLaMA or T5 model it fuses). ``onnx.checker`` refuses
such a node ("No Op registered for ... with domain_version of N"), so a model ONNX Runtime runs would be
refused. graphopt carries these nodes verbatim (as it does any op it does not know) and checks the rest
of the model: while the checker runs, they are moved to a private domain, whose nodes it does not check.
Only op names ONNX Runtime itself registers in the default domain qualify: any other unknown name in
the default domain is still an invalid model.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import onnx

UNCHECKED_DOMAIN = "graphopt.unchecked"


@functools.cache
def _runtime_default_domain_ops() -> frozenset[str]:
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:  # (without ONNX Runtime nothing qualifies: the model is checked as it is)
        return frozenset()
    schemas = getattr(_pybind_state, "get_all_operator_schema", lambda: [])()
    return frozenset(s.name for s in schemas if s.domain in ("", "ai.onnx"))


def runtime_only_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Default-domain nodes, subgraphs included, whose op has no ONNX schema but that ONNX Runtime runs."""
    known = _runtime_default_domain_ops()
    return [
        node
        for node in _all_nodes(model.graph)
        # (a damaged name reads as bytes, not text: no schema has it, and the checker names it)
        if node.domain in ("", "ai.onnx")
        and isinstance(node.op_type, str)
        and node.op_type in known
        and not onnx.defs.has(node.op_type)
    ]


@contextlib.contextmanager
def unchecked(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> Iterator[None]:
    """``nodes`` (of ``model``) moved to a private domain for the duration, then put back as they were."""
    if not nodes:
        yield
        return
    domains = [node.domain if node.HasField("domain") else None for node in nodes]
    for node in nodes:
        node.domain = UNCHECKED_DOMAIN
    model.opset_import.add(domain=UNCHECKED_DOMAIN, version=1)
    try:
        yield
    finally:
        del model.opset_import[len(model.opset_import) - 1]
        for node, domain in zip(nodes, domains, strict=True):
            if domain is None:  # (an unset field stays unset: the model's bytes are as they were)
                node.ClearField("domain")
            else:
                node.domain = domain


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    yield from _all_nodes(subgraph)
