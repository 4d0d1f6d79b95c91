"""Per-slice chains: the nodes between a piece and the value a stack/concat combines.

A chain is traced backwards from the combined value through single-output ops that have a batching
rule; it stops at constants and at the first value that is not made that way (the piece). Every value
inside must be read only inside the chain, or the chain is refused. Two chains are *identical* when
their nodes, in the same deterministic order, have the same ops, attributes, wiring, dtypes and
shapes; their constants may differ (they are stacked once, at optimize time).
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.ir import Graph, Node, Value, constant_of
from graphopt.ir.attrs import frozen
from graphopt.rewrite import Fail, why_kept

from .batch_ops import BATCHABLE


@dataclass
class Chain:
    piece: Value  # the slice the chain starts from
    nodes: list[Node]  # in dependency order; nodes[-1] produces ``output``
    output: Value  # what the combine reads


def members(chains: list[Chain]) -> set[Node]:
    """Every node of every chain."""
    return {node for chain in chains for node in chain.nodes}


def trace_chain(graph: Graph, output: Value, combine: Node) -> Chain | Fail:
    """The chain ending at ``output`` (an input of ``combine``), or why there is none."""
    if output.producer is None or output.producer.op not in BATCHABLE or constant_of(output) is not None:
        return Chain(output, [], output)
    order: list[Node] = []
    inside: set[Node] = set()
    leaves: dict[Value, None] = {}
    _collect(output.producer, inside, order, leaves)
    inner = [value for node in order for value in node.outputs if value is not output]
    reason = why_kept(graph, inner, inside) or why_kept(graph, [output], [combine])
    if reason:
        return Fail(reason)
    if len(leaves) != 1:
        names = ", ".join(repr(v.name) for v in leaves) or "none"
        return Fail(
            f"the chain ending at {output.name!r} reads {len(leaves)} run-time values ({names}), not one"
        )
    return Chain(next(iter(leaves)), order, output)


def _collect(root: Node, inside: set[Node], order: list[Node], leaves: dict[Value, None]) -> None:
    """Post-order DFS over batchable producers; the values where it stops are the leaves."""
    stack = [(root, root.inputs, 0)]  # (each node's inputs, read once: ``Node.inputs`` copies them)
    inside.add(root)
    while stack:
        node, inputs, index = stack.pop()
        if index < len(inputs):
            stack.append((node, inputs, index + 1))
            value = inputs[index]
            if value is None or constant_of(value) is not None:
                continue
            producer = value.producer
            if producer in inside:
                continue
            if producer is None or producer.op not in BATCHABLE or len(producer.outputs) != 1:
                leaves[value] = None
                continue
            inside.add(producer)
            stack.append((producer, producer.inputs, 0))
        else:
            order.append(node)


def signature(chain: Chain) -> tuple:
    """A structural key: equal for chains that compute the same function of their pieces."""
    index = {node: i for i, node in enumerate(chain.nodes)}
    key = []
    for node in chain.nodes:
        inputs = []
        for value in node.inputs:
            if value is None:
                inputs.append(("none",))
            elif value is chain.piece:
                inputs.append(("piece",))
            elif value.producer in index:
                inputs.append(("node", index[value.producer], value.index))
            else:
                tensor = constant_of(value)
                inputs.append(("const", str(tensor.dtype), tensor.shape))
        outputs = tuple((str(v.dtype), v.shape) for v in node.outputs)
        key.append((node.op, frozen(node.attrs), tuple(inputs), outputs))
    return (str(chain.piece.dtype), chain.piece.shape, tuple(key))


def first_difference(chains: list[Chain]) -> str:
    """Names where the first chain that differs from chain 0 departs from it, for the near-miss report."""
    reference = signature(chains[0])
    for i, chain in enumerate(chains[1:], start=1):
        other = signature(chain)
        if other == reference:
            continue
        if other[:2] != reference[:2]:
            mine, theirs = f"{reference[0]}{list(reference[1] or [])}", f"{other[0]}{list(other[1] or [])}"
            return f"piece {i} ({chain.piece.name!r}) is {theirs}, piece 0 is {mine}"
        if len(other[2]) != len(reference[2]):
            return f"chain {i} has {len(chain.nodes)} ops, chain 0 has {len(chains[0].nodes)}"
        for j, (mine, theirs) in enumerate(zip(reference[2], other[2], strict=True)):
            if mine != theirs:
                a, b = chains[0].nodes[j], chain.nodes[j]
                parts = ("op", "attributes", "inputs", "output types")
                what = next(part for part, x, y in zip(parts, mine, theirs, strict=True) if x != y)
                return f"chain {i} differs from chain 0 in the {what} of {b.op} {b.name!r} (vs {a.name!r})"
    return "chains are identical"
