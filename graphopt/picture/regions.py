"""Fused regions: which original nodes a rewrite replaced, and which nodes took their place.

The optimizer keeps value names (a node that takes over a value takes its name), so two graphs can be
compared without any record of the rewrites: a node of the optimized graph whose op, input names and output
names all appear unchanged in the original is kept; the others are new. Original nodes without such a twin
are replaced. New nodes joined by values only the optimized graph has are one rewrite; its region in the
original is the replaced nodes on the paths from the rewrite's inputs to its outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph, Node, Op
from .labels import FUSED_IR_OPS

_BOOKKEEPING = frozenset({Op.IDENTITY, Op.CONSTANT})


@dataclass
class Region:
    before: list[Node] = field(default_factory=list)  # original nodes the rewrite replaced
    after: list[Node] = field(default_factory=list)  # nodes that took their place

    @property
    def rules(self) -> list[str]:
        """The rules that made the new nodes, when the optimized graph was made in this process."""
        return sorted({n.meta["rule"] for n in self.after if n.meta.get("rule")})

    @property
    def fused(self) -> bool:
        return any(n.op in FUSED_IR_OPS for n in self.after)

    @property
    def shrinks(self) -> bool:
        """Fewer real ops than before. Identities and Constants do not count, and a region that only renamed
        its ops (an activation recognized and written back in the ops the target opset has) is no change."""
        before = sorted(n.op for n in self.before if n.op not in _BOOKKEEPING)
        after = sorted(n.op for n in self.after if n.op not in _BOOKKEEPING)
        return bool(after) and len(after) < len(before) and before != after


def _key(node: Node) -> tuple:
    return (
        node.op,
        tuple("" if v is None else v.name for v in node.inputs),
        tuple(v.name for v in node.outputs),
    )


def diff_regions(before: Graph, after: Graph) -> tuple[list[Region], int]:
    """Regions that fused or recognized something (fewer nodes, or a fused op), in the optimized graph's
    order, and the number of other replaced nodes (folded constants, removed dead or no-op nodes)."""
    kept = {_key(n) for n in before} & {_key(n) for n in after}
    removed = [n for n in before if _key(n) not in kept]
    added = [n for n in after if _key(n) not in kept]
    old_names = {v.name for v in before.values()}
    claimed: set[Node] = set()
    regions = []
    for group in _groups(added, old_names):
        cone = [n for n in _cone(group, removed, old_names) if n not in claimed]
        claimed.update(cone)
        regions.append(Region(before=cone, after=group))
    regions = [r for r in regions if r.fused or r.shrinks]
    shown = sum(len(r.before) for r in regions)
    return regions, len(removed) - shown


def _groups(added: list[Node], old_names: set[str]) -> list[list[Node]]:
    """New nodes joined by the values only the new graph has (a Reshape made to feed a fused op): one rewrite
    each. Values the original also had are boundaries, so consecutive layers stay apart."""
    parent = {n: n for n in added}

    def find(node: Node) -> Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for node in added:
        for value in node.outputs:
            if value.name in old_names:
                continue
            for use in value.uses:
                if use.node in parent:
                    parent[find(use.node)] = find(node)
    groups: dict[Node, list[Node]] = {}
    for node in added:
        groups.setdefault(find(node), []).append(node)
    return list(groups.values())


def _cone(group: list[Node], removed: list[Node], old_names: set[str]) -> list[Node]:
    """The replaced nodes between the group's inputs and its outputs in the original graph."""
    inside = set(group)
    sources = {v.name for n in group for v in n.inputs if v is not None and v.producer not in inside}
    targets = {v.name for n in group for v in n.outputs if v.name in old_names}
    readers: dict[str, list[Node]] = {}
    maker: dict[str, Node] = {}
    for node in removed:
        for value in node.inputs:
            if value is not None:
                readers.setdefault(value.name, []).append(node)
        for value in node.outputs:
            maker[value.name] = node
    below: set[Node] = set()
    frontier = [n for name in sources for n in readers.get(name, ())]
    while frontier:
        node = frontier.pop()
        if node not in below:
            below.add(node)
            frontier += [r for v in node.outputs if v.name not in targets for r in readers.get(v.name, ())]
    above: set[Node] = set()
    frontier = [maker[name] for name in targets if name in maker]
    while frontier:
        node = frontier.pop()
        if node not in above:
            above.add(node)
            frontier += [maker[v.name] for v in node.inputs if v is not None and v.name in maker]
    # A replaced node with no input from outside (a folded Shape → Gather chain) counts if it feeds the cone.
    return [n for n in removed if n in above and (n in below or not any(v is not None for v in n.inputs))]


def fused_regions(graph: Graph) -> list[Region]:
    """In a single graph: its fused-op nodes, connected ones together (no original to compare with)."""
    fused = [n for n in graph if n.op in FUSED_IR_OPS]
    members = set(fused)
    regions: list[Region] = []
    seen: set[Node] = set()
    for node in fused:
        if node in seen:
            continue
        stack, group = [node], []
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            group.append(current)
            neighbours = [v.producer for v in current.inputs if v is not None and v.producer in members]
            neighbours += [u.node for v in current.outputs for u in v.uses if u.node in members]
            stack.extend(neighbours)
        regions.append(Region(after=group))
    return regions
