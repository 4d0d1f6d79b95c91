"""ONNX subgraphs (If/Loop/Scan bodies): which outer values they read, and which names they define.

The frontend needs these to order and carry such nodes, the backend to write them back.
"""

from __future__ import annotations

import onnx


def has_subgraphs(node: onnx.NodeProto) -> bool:
    """Whether an attribute of the node holds a graph (If/Loop/Scan bodies)."""
    attributes = node.attribute
    return bool(attributes) and any(a.type in _GRAPH_TYPES for a in attributes)


_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def captured_names(node: onnx.NodeProto) -> list[str]:
    """Outer values that the node's subgraphs read by name (If/Loop/Scan bodies)."""
    if not has_subgraphs(node):
        return []
    names: dict[str, None] = {}
    for attribute in node.attribute:
        for sub in attribute_graphs(attribute):
            _free_names(sub, set(), names)
    return list(names)


def _free_names(graph: onnx.GraphProto, outer: set[str], free: dict[str, None]) -> None:
    bound = set(outer)
    bound.update(i.name for i in graph.input)
    bound.update(t.name for t in graph.initializer)
    for node in graph.node:
        for name in node.input:
            if name and name not in bound:
                free[name] = None
        for attribute in node.attribute:
            for sub in attribute_graphs(attribute):
                _free_names(sub, bound, free)
        bound.update(node.output)
    for output in graph.output:
        if output.name not in bound:
            free[output.name] = None


def attribute_graphs(attribute: onnx.AttributeProto):
    if attribute.type == onnx.AttributeProto.GRAPH:
        yield attribute.g
    elif attribute.type == onnx.AttributeProto.GRAPHS:
        yield from attribute.graphs


def names_inside(node: onnx.NodeProto):
    """The value names defined inside the node's subgraphs, at any depth."""
    for attribute in node.attribute:
        for sub in attribute_graphs(attribute):
            yield from (i.name for i in sub.input)
            yield from (t.name for t in sub.initializer)
            for inner in sub.node:
                yield from inner.output
                yield from names_inside(inner)
