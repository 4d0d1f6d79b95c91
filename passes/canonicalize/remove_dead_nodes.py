"""remove_dead_nodes: erase nodes and constants that no graph output depends on."""

from __future__ import annotations

from graphopt.rewrite import Pass, RewriteStats


def run(graph) -> RewriteStats:
    stats = RewriteStats()
    constants = len(graph.constants)
    nodes = graph.remove_dead()
    if nodes:
        stats.counts["dead_node"] = nodes
    if len(graph.constants) < constants:
        stats.counts["unused_constant"] = constants - len(graph.constants)
    return stats


PASS = Pass("remove_dead_nodes", "Remove nodes and constants whose values nothing reads.", run)
