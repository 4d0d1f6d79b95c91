"""Independent chains may be batched only if none of their inputs depends on another chain."""

from __future__ import annotations

from ..ir import Graph, Value
from ..rewrite.reachability import ancestors, dependency_graph


def depends_on_any(graph: Graph, pieces: list[Value], chains) -> bool:
    members = {node for chain in chains for node in chain.nodes}
    if not members:
        return False
    return bool(ancestors(dependency_graph(graph), pieces) & members)
