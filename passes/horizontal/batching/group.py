"""Finding a batchable group at a stack/concat, and rewriting it into one batched chain."""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.ir import Node, Op, Value
from graphopt.ir.ops import VIEWS
from graphopt.rewrite import Builder, Decline, Fail, Match

from .batch_ops import RULES, Batched, Constant, Operand, move_axis
from .chains import Chain, first_difference, members, signature, trace_chain
from .reachability import depends_on
from .sources import Source, piece_shared, read_elsewhere, split_source, value_source


@dataclass
class Group:
    chains: list[Chain]
    source: Source


def find_group(match: Match, *, independent: bool) -> Match | Fail | None:
    """The check shared by both passes: split-rooted groups, or (``independent``) unrelated chains."""
    combine = match.root
    graph = combine.graph
    if len(combine.inputs) < 2:
        return None
    chains = []
    for i, value in enumerate(combine.inputs):
        chain = trace_chain(graph, value, combine)
        if isinstance(chain, Fail):
            return None if independent else Fail(f"chain {i}: {chain.reason}")
        chains.append(chain)
    unknown = next((c.piece.name for c in chains if c.piece.rank is None and c.nodes), None)
    if unknown is not None:
        # (the batching rules place the batch axis and move the ops' axes by the pieces' rank)
        return Fail(f"piece {unknown!r} has no known rank")
    source = split_source(chains)
    if independent:
        if source is not None or any(
            c.piece.producer is not None and c.piece.producer.op == Op.SPLIT for c in chains
        ):
            return None  # pieces of one value belong to batch_split_chains
        if signature(chains[0]) != signature(chains[1]) or not _computes(chains[0]):
            return None
    elif source is None:
        return None
    elif isinstance(source, Fail):
        return source
    reference = signature(chains[0])
    if any(signature(c) != reference for c in chains[1:]):
        return Fail(first_difference(chains))
    reason = piece_shared(chains)
    if reason:
        return Fail(reason)
    if independent:
        if combine.attrs["axis"] != 0 and sum(n.op not in VIEWS for n in chains[0].nodes) < 2:
            # The inputs are stacked (a copy) and the result moved back to the axis (another copy):
            # for one op per chain that costs more than the launches it saves.
            return Fail(f"one op per chain, joined on axis {combine.attrs['axis']}: the copies cost more")
        source = value_source(chains)
        if not isinstance(source, Fail) and depends_on(graph, [c.piece for c in chains], members(chains)):
            return Fail("one chain's input depends on another chain")
    if isinstance(source, Fail):
        return source
    match.matched.extend(node for chain in chains for node in chain.nodes)
    if not read_elsewhere(chains, combine):
        match.matched.extend(source.consumed)
    return match.with_info(group=Group(chains, source))


def _computes(chain: Chain) -> bool:
    """Batching pays when a chain launches work; a chain of views only moves no data."""
    return any(node.op not in VIEWS for node in chain.nodes)


def rewrite_group(b: Builder, match: Match) -> Value:
    group: Group = match.info["group"]
    batched = batch_chains(b, group.chains, group.source.build(b))
    return combine(b, batched, match.root)


def batch_chains(b: Builder, chains: list[Chain], start: Batched) -> Batched:
    results: dict[Node, Batched] = {}
    for position, node in enumerate(chains[0].nodes):
        nodes = [chain.nodes[position] for chain in chains]
        operands = [_operand(chains, nodes, i, start, results) for i in range(len(node.inputs))]
        if not any(isinstance(o, Batched) for o in operands):
            raise Decline(f"{node.op} {node.name!r} computes only on constants; fold it first")
        outcome = RULES[node.op](b, nodes, operands)
        if isinstance(outcome, Fail):
            raise Decline(outcome.reason)
        results[node] = outcome
    return results[chains[0].nodes[-1]] if chains[0].nodes else start


def _operand(chains, nodes, index: int, start: Batched, results) -> Operand:
    value = nodes[0].input(index)
    if value is None:
        return None
    if value is chains[0].piece:
        return start
    if value.producer in results:
        return results[value.producer]
    return Constant(tuple(node.input(index) for node in nodes))


def combine(b: Builder, batched: Batched, node: Node) -> Value:
    """The batched result in the layout the stack/concat produced."""
    axis = node.attrs["axis"]
    moved = move_axis(b, batched, axis)
    if node.op == Op.STACK:
        return moved
    shape = node.output.shape
    tail = shape[axis + 1 :]
    if any(not isinstance(d, int) for d in tail):
        raise Decline(f"concat {node.name!r} has symbolic dims after its axis")
    return b.reshape(moved, shape=(*([0] * axis), -1, *tail))
