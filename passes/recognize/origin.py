"""What a recognizer replaced, kept so that it can be given back.

A recognizer (GELU from its tanh formula, a norm from its reductions, a linear from its transposed
matmul) is a means, not a result: its op pays only when a fusion consumes it. Written out on its own it
would be a new decomposition, which a runtime's optimizer may no longer recognize (ONNX Runtime fuses
the exporters' GELU formula into one FastGelu kernel, not graphopt's). So each node a recognizer builds
carries an ``Origin``: the very nodes it replaced, erased but intact (the recognizers' passes hand
``note_origin`` to the driver, which calls it after each rewrite). ``restore`` revives them in place
of a recognized op that is still in the graph when fusion is done, and the backends write them back
verbatim (they keep their frontend records).

Recognitions compose: when a recognizer replaces a recognized node (a norm's scale folded into it), the
new origin takes in the old one's nodes, so the whole chain goes back as the model had it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graphopt.ir import Graph, GraphError, Node, Value
from graphopt.rewrite import count_rewrite, may_rewrite

log = logging.getLogger(__name__)

ORIGIN = "origin"  # the node metadata key


@dataclass(eq=False)
class Origin:
    created: list[Node]  # the recognized nodes (all of one rewrite)
    nodes: list[Node] = field(default_factory=list)  # the replaced nodes, erased
    # (a created output, the original value it replaced)
    replaced: list[tuple[Value, Value]] = field(default_factory=list)
    # A value the replaced nodes read that stands for another: a recognized node's output (for the
    # original value it replaced) or an input a rewrite replaced since.
    aliases: dict[Value, Value] = field(default_factory=dict)
    # A value the replaced nodes read that a created node reads too: whatever that node reads now
    # (a later rewrite may have merged it with an equal value).
    bindings: dict[Value, tuple[Node, int]] = field(default_factory=dict)
    constant_nodes: dict[Value, Node] = field(default_factory=dict)  # constant nodes read, by output

    def resolve(self, value: Value) -> Value:
        seen = 0
        while value in self.aliases and seen < len(self.aliases):
            value, seen = self.aliases[value], seen + 1
        binding = self.bindings.get(value)
        if binding is not None and binding[0].graph is not None:
            return binding[0].input(binding[1])
        return value


def note_origin(
    matched: Sequence[Node], created: Sequence[Node], pairs: Iterable[tuple[Value, Value]]
) -> None:
    """Attaches to ``created`` what the rewrite erased of ``matched``; ``pairs`` are the (old, new) values
    the rewrite swapped."""
    erased = [n for n in matched if n.graph is None]
    if not erased or not created:
        return
    origin = Origin(list(created))
    for node in erased:
        inner: Origin | None = node.meta.get(ORIGIN)
        if inner is not None and all(c.graph is None for c in inner.created):
            _absorb(origin, inner)
        else:
            origin.nodes.append(node)
    for old, new in pairs:
        original = origin.aliases.get(old, old)
        origin.replaced.append((new, original))
    for node in created:
        for index, value in enumerate(node.inputs):
            if value is not None:
                origin.bindings.setdefault(value, (node, index))
    produced = {v for n in origin.nodes for v in n.outputs}
    for node in origin.nodes:
        for value in node.inputs:
            producer = value.producer if value is not None else None
            if value not in produced and producer is not None and producer.op == "constant":
                origin.constant_nodes[value] = producer
    for node in created:
        node.meta[ORIGIN] = origin


def _absorb(origin: Origin, inner: Origin) -> None:
    """Takes in the origin of a recognized node that this rewrite replaces in turn."""
    origin.nodes += inner.nodes
    origin.aliases.update(inner.aliases)
    origin.constant_nodes.update(inner.constant_nodes)
    for value, (node, index) in inner.bindings.items():
        origin.aliases.setdefault(value, node.input(index))  # (what the erased node last read)
    for new, original in inner.replaced:
        origin.aliases[new] = original


def restore(graph: Graph, origin: Origin) -> str | None:
    """Puts the original nodes back in place of the recognized ones (all still in the graph); returns
    why it cannot, changing nothing, when what the originals read no longer exists."""
    produced = {v for n in origin.nodes for v in n.outputs}
    reads: dict[Value, Value] = {}
    constants: list[Value] = []
    constant_nodes: list[Node] = []
    for node in origin.nodes:
        for value in node.inputs:
            if value is None or value in produced or value in reads:
                continue
            now = origin.resolve(value)
            reads[value] = now
            if graph.owns(now) or now in produced:
                continue
            if now.const is not None and graph.constants.get(now.name) is None:
                constants.append(now)
            elif now in origin.constant_nodes and origin.constant_nodes[now].graph is None:
                constant_nodes.append(origin.constant_nodes[now])
            else:
                return f"{node.op} {node.name!r} read {now.name!r}, which a later pass removed"
    for value in constants:
        graph.revive_constant(value)
    for node in constant_nodes:
        graph.revive(node)
    for node in sorted(origin.nodes, key=lambda n: n.seq):
        graph.revive(node, reads)
    for new, original in origin.replaced:
        graph.replace_all_uses(new, original)
        # The created value took the name its readers and the graph's outputs know (the original's,
        # or a graph output's when a later pass put it there): the original takes it back.
        graph.swap_names(new, original)
    for node in reversed(origin.created):
        if not any(graph.is_used(v) for v in node.outputs):
            graph.erase(node)
    return None


def restore_unfused(graph: Graph) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Gives back every recognized op still in the graph: counts by op, and (node, reason) for those
    that had to stay."""
    counts: dict[str, int] = {}
    kept: list[tuple[str, str]] = []
    done: set[int] = set()
    for node in graph.nodes:
        origin: Origin | None = node.meta.get(ORIGIN)
        if origin is None or id(origin) in done or node.graph is not graph:
            continue
        done.add(id(origin))
        if any(created.graph is not graph for created in origin.created) or not may_rewrite():
            continue  # (a fusion consumed part of it)
        try:
            reason = restore(graph, origin)
        except GraphError as error:  # (an invariant the originals need no longer holds: keep the op)
            reason = str(error)
        if reason is None:
            count_rewrite("restore_unfused", node.name)
            counts[node.op] = counts.get(node.op, 0) + 1
        else:
            log.debug("%s: not restored: %s", node.name, reason)
            kept.append((node.name, reason))
    return counts, kept
