"""Reachability questions on the IR, answered with networkx.

Rewriting N chains into one must not create a cycle: that happens exactly when a value the rewrite
would read depends on one of the nodes it replaces.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from graphopt.ir import Graph, Node, Value


def dependency_graph(graph: Graph) -> nx.DiGraph:
    """An edge producer → consumer for every value a node reads."""
    dag = nx.DiGraph()
    dag.add_nodes_from(graph)
    for node in graph:
        for value in node.inputs:
            if value is not None and value.producer is not None:
                dag.add_edge(value.producer, node)
    return dag


def ancestors(dag: nx.DiGraph, values: Iterable[Value]) -> set[Node]:
    found: set[Node] = set()
    for value in values:
        if value.producer is not None and value.producer not in found:
            found.add(value.producer)
            found |= nx.ancestors(dag, value.producer)
    return found


def depends_on(graph: Graph, values: Iterable[Value], nodes: Iterable[Node]) -> bool:
    """Whether any of ``values`` is computed, directly or not, from any of ``nodes``."""
    nodes = set(nodes)
    if not nodes:
        return False
    return bool(ancestors(dependency_graph(graph), values) & nodes)
