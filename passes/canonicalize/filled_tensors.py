"""Tensors a program makes fresh and then fills in place: which nodes build one, and what is read of it.

torchvision's Swin builds the mask of its shifted windows as ``mask = x.new_zeros(H, W)``, then
``mask[h, w] = k`` for nine regions (a slice of a slice, written by ``fill_``); diffusers' 1-d UNet
puts a kernel on the diagonal of a fresh weight (``weight[i, i] = kernel``, an ``index_put_``). No node
of these is a constant on its own: fold_constants never folds a tensor an in-place op writes. Taken
together they may be one: the tensor's producer (the root), the views taken of it (and of those), and
the writes to any of them, run in order, give the values that everything after the last write reads.

A region is found here only where its order cannot be observed from outside it:
- nodes outside the region read its values only after its last write (so they read the final values);
- no node outside it may write or alias the tensor through an input other than its first (an op the
  walk below does not follow), and none of its values is a graph output (the caller would hold it).
Whether what the region reads from outside is constant, and whether its calls may be run at all, is
for the folding (and the frontend's evaluator) to decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from graphopt.ir import Graph, Node, Value
from graphopt.ir.ops import VIEWS


@dataclass
class FilledTensor:
    nodes: list[Node]  # the root first, then its views and the writes to them, in graph order
    read: list[Value]  # the region's values that nodes after it read


def filled_tensors(graph: Graph) -> Iterator[FilledTensor]:
    """Each region, found as it is reached: folding one changes no other (their nodes are disjoint: each
    node's first input comes from one root), and a region whose inputs an earlier fold made constant
    sees the constants."""
    position = {node: i for i, node in enumerate(graph)}
    roots = dict.fromkeys(_root(node) for node in graph if node.meta.get("mutates"))
    for root in roots:
        if root is not None and root.graph is graph:
            region = _region(graph, root, position)
            if region is not None:
                yield region


def _touches(node: Node) -> bool:
    """Whether ``node`` may write its first input or return a view of it."""
    return bool(node.meta.get("mutates") or node.meta.get("aliases_input")) or node.op in VIEWS


def _root(write: Node) -> Node | None:
    """The node that made the tensor ``write`` writes: up through views and earlier writes (which return
    their first input) to a node that makes a fresh tensor; None for a constant or an input."""
    value = write.input(0)
    while value is not None and value.producer is not None and _touches(value.producer):
        value = value.producer.input(0)
    producer = value.producer if value is not None else None
    if producer is None or len(producer.outputs) != 1 or producer.meta.get("side_effects"):
        return None  # (a placeholder of state the program writes has side effects)
    return producer


def _region(graph: Graph, root: Node, position: dict[Node, int]) -> FilledTensor | None:
    members = {root: None}
    frontier = [root.output]
    while frontier:
        for use in frontier.pop().uses:
            if use.index == 0 and _touches(use.node) and use.node not in members:
                members[use.node] = None
                frontier.extend(use.node.outputs)
    read: dict[Value, None] = {}
    readers = []
    for node in members:
        for value in node.outputs:
            if graph.is_output(value):
                return None
            for use in value.uses:
                if use.node in members:
                    continue  # (run in order with the rest: it reads what the program reads there)
                if _touches(use.node):
                    return None  # (it may write the tensor, or view it, through another input)
                read[value] = None
                readers.append(use.node)
    last_write = max(position[n] for n in members if n.meta.get("mutates"))
    if any(position.get(reader, -1) < last_write for reader in readers):
        return None  # (it reads the tensor before it is filled)
    return FilledTensor(sorted(members, key=position.__getitem__), list(read))
