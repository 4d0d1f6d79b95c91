"""Applies rules to a fixed point and does all the surgery, so that rules never touch the graph."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..ir import Graph, GraphError, Node, Value, record_origins
from ..ir.provenance import has_origins
from .budget import count_rewrite, may_rewrite
from .pattern import Either, Match, NodePattern, match
from .rule import Builder, Decline, Fail, InPlace, Rule

MAX_ROUNDS = 100

# Told of each rewrite that builds nodes: the matched nodes, the nodes built, the (old, new) values swapped.
OnRewrite = Callable[[Sequence[Node], Sequence[Node], Sequence[tuple[Value, Value]]], None]


@dataclass(frozen=True)
class NearMiss:
    """A place where a rule's pattern matched but the rule declined, and why."""

    rule: str
    node: str
    reason: str


@dataclass
class RewriteStats:
    counts: Counter = field(default_factory=Counter)
    near_misses: list[NearMiss] = field(default_factory=list)

    def merge(self, other: RewriteStats) -> None:
        self.counts.update(other.counts)
        seen = set(self.near_misses)
        self.near_misses.extend(m for m in other.near_misses if m not in seen)


def apply_rules(graph: Graph, rules: Sequence[Rule], *, on_rewrite: OnRewrite | None = None) -> RewriteStats:
    """Applies the rules until none matches. After the first round only the neighbourhood of what the
    previous round changed is searched again: a match needs a changed node within its pattern's depth.
    Of those candidates, a rule tries the ones that ``_possible_roots`` leaves. ``on_rewrite`` is told of
    each rewrite (a recognizer's new nodes keep what they replaced: passes/recognize/origin.py)."""
    stats = RewriteStats()
    misses: dict[tuple[str, str], tuple[NearMiss, Node]] = {}  # by (rule, node): the miss, where
    depth = max((pattern_depth(rule.root) for rule in rules), default=1)
    dirty: dict[str, list[Node]] | None = None  # by op; None: every node
    for _ in range(MAX_ROUNDS):
        changed = False
        touched: list[Node] = []
        for rule in rules:
            if dirty is None:
                candidates = graph.nodes_of(rule.root.ops)
            else:  # in creation order, as nodes_of gives them, without walking every node of the op
                dirty_of_op = (n for op in rule.root.ops for n in dirty.get(op, ()))
                candidates = sorted(dirty_of_op, key=lambda n: n.seq)
            roots, reach = _possible_roots(graph, rule.root, len(candidates))  # roots None: all may match
            for node in candidates:
                if roots is not None and node not in roots:
                    continue
                if node not in graph:
                    continue  # erased by an earlier rewrite of this round
                found = match(rule.root, node)
                if found is None:
                    continue
                name = rule.name_of(found)
                outcome = _qualify(graph, rule, found)  # (None: the rule does not apply, nothing came close)
                if outcome is not None and not isinstance(outcome, Fail) and may_rewrite():
                    try:
                        changes = rewrite_match(graph, name, outcome, rule.replace, on_rewrite=on_rewrite)
                    except Decline as declined:
                        outcome = Fail(declined.reason)
                    else:
                        touched += changes
                        if roots is not None:  # (new reads can bring a needed op within reach of more nodes)
                            roots |= _downstream(changes, reach)
                        misses.pop((name, node.name), None)
                        count_rewrite(name, node.name)
                        stats.counts[name] += 1
                        changed = True
                if isinstance(outcome, Fail):
                    misses[(name, node.name)] = (NearMiss(name, node.name, outcome.reason), node)
        if not changed:
            break
        dirty = _by_op(_downstream([n for n in touched if n in graph], depth))
    else:
        raise GraphError(
            f"rules {[r.name for r in rules]} did not reach a fixed point in {MAX_ROUNDS} rounds"
        )
    graph.sort()
    # A near miss at a node that a later rewrite removed is no longer a miss.
    stats.near_misses = [miss for miss, at in misses.values() if at in graph]
    return stats


def _by_op(nodes: Iterable[Node]) -> dict[str, list[Node]]:
    """The nodes grouped by op (each rule of a round then looks at its root's ops only)."""
    grouped: dict[str, list[Node]] = {}
    for node in nodes:
        grouped.setdefault(node.op, []).append(node)
    return grouped


def _possible_roots(graph: Graph, pattern, candidates: int) -> tuple[set[Node] | None, int]:
    """The candidates that can match ``pattern`` as far as ops tell, and how many reads ``reach`` the
    narrowing looks up; (None, 0) when finding them would cost more than trying the ``candidates``.

    The pattern needs a node of some op (the rarest in it) ``reach`` inputs above its root, through
    nodes of the ops on the way: the set is what lies at the end of such paths in the graph. A
    candidate outside it can come to match only through a read that a rewrite adds, and every added
    read is by a node that the rewrite returns as changed: the nodes within ``reach`` reads of those
    join the set. Most patterns need an op far rarer than their root's (GELU's ``mul`` reads an
    ``erf``), so this spares trying thousands of nodes one by one. Alternatives at the root: the
    union of each one's set (reached within the farthest of their reaches).
    """
    if isinstance(pattern, Either):
        found = [_possible_roots(graph, p, candidates) for p in pattern.alternatives.values()]
        if any(roots is None for roots, _ in found):
            return None, 0
        return set().union(*(roots for roots, _ in found)), max(reach for _, reach in found)
    needed = [(sub, path) for sub, path in _sub_patterns(pattern, ()) if path]
    if not needed:
        return None, 0
    rarest, path = min(needed, key=lambda found: graph.count_of(found[0].ops))
    if graph.count_of(rarest.ops) >= 2 * candidates:
        return None, 0  # (following that many nodes' reads would take longer than trying the candidates)
    roots = set(graph.nodes_of(rarest.ops))
    for ops in reversed(path):  # (from the rarest node's reader down to the root)
        roots = {
            use.node for node in roots for value in node.outputs for use in value.uses if use.node.op in ops
        }
    return roots, len(path)


def _sub_patterns(pattern: NodePattern, path: tuple) -> Iterator[tuple[NodePattern, tuple]]:
    """Every node pattern within ``pattern``, with the ops of the patterns between it and the root
    (the root's first; empty for the root itself). Those inside an ``Either`` are needed by one
    alternative only: not counted."""
    yield pattern, path
    for sub in pattern.inputs:
        if isinstance(sub, NodePattern):
            yield from _sub_patterns(sub, (*path, pattern.ops))


def pattern_depth(pattern) -> int:
    if isinstance(pattern, Either):
        return max(pattern_depth(p) for p in pattern.alternatives.values())
    return 1 + max((pattern_depth(p) for p in getattr(pattern, "inputs", ())), default=0)


def _downstream(nodes: list[Node], depth: int) -> set[Node]:
    """The nodes within ``depth`` reads of ``nodes`` (themselves included): where new matches can root."""
    found = set(nodes)
    frontier = found
    for _ in range(depth):
        frontier = {use.node for node in frontier for value in node.outputs for use in value.uses} - found
        if not frontier:
            break
        found |= frontier
    return found


def _qualify(graph: Graph, rule: Rule, found: Match) -> Match | Fail | None:
    if not rule.allow_external_uses and len(found.matched) > 1:  # (a canonicalization: its root alone)
        reason = why_kept(graph, found.inner_values(), found.matched)
        if reason:
            return Fail(reason)
    try:
        return rule.check(found)
    except GraphError as error:  # the matched nodes break what the rule relies on (an axis out of range
        return Fail(str(error))  # in a damaged model): no rewrite, and a near miss that says why


def why_kept(graph: Graph, values: Iterable[Value], replaced: Iterable[Node]) -> str | None:
    """Why one of ``values`` cannot disappear with the ``replaced`` nodes (a graph output, or another
    node reads it), or None: the one answer for rules, recognizers and batching alike."""
    inside = set(replaced)
    for value in values:
        if graph.is_output(value):
            return f"{value.name!r} is a graph output"
        for use in value.uses:
            if use.node not in inside:
                return f"{value.name!r} is also read by {use.node.op} {use.node.name!r}"
    return None


def rewrite_match(
    graph: Graph, rule_name: str, found: Match, replace, *, on_rewrite: OnRewrite | None = None
) -> list[Node]:
    """Runs ``replace`` and swaps its results in for what it replaces; returns the nodes it changed:
    the new ones and those that now read a replacement."""
    builder = Builder(graph, rule_name, anchor=found.root)
    try:
        results = replace(builder, found)
    except Decline:
        _undo(graph, builder)
        raise
    _record_origins(builder, found.matched)
    root = found.root
    if isinstance(results, InPlace):
        if builder.created:
            raise GraphError(f"rule {rule_name} built nodes and also changed {root.name!r} in place")
        # The root is no longer what the frontend read: a backend writes it from its canonical form.
        if results.inputs is not None:
            root.set_inputs(results.inputs)
        root.attrs, root.source = dict(results.attrs), None
        if len(found.matched) > 1:  # (a canonicalization matches its root alone)
            erase_dead(graph, [n for n in found.matched if n is not root])
        return [root]
    if isinstance(results, dict):
        # Besides the root's outputs, the rule replaces other matched values (a fused op that also
        # returns an intermediate, such as the residual sum that later layers read).
        pairs = list(results.items())
    else:
        results = [results] if isinstance(results, Value) else list(results)
        if len(results) > len(root.outputs):
            raise GraphError(
                f"rule {rule_name} returned {len(results)} values for {len(root.outputs)} outputs"
            )
        pairs = [(old, new) for old, new in zip(root.outputs, results, strict=False) if new is not None]
    for old, new in pairs:
        differs = _shape_change(old, new)
        if differs is not None:
            _undo(graph, builder)
            raise Decline(f"rule {rule_name} would change {old.name!r}: {differs}")
    replaced = {old for old, _ in pairs}
    for old in root.outputs:
        if old not in replaced and graph.is_used(old):
            raise GraphError(f"rule {rule_name} dropped {old.name!r}, which is still read")
    for old, new in pairs:
        replace_value(graph, old, new, builder.created)
    erase_dead(graph, found.matched)
    if on_rewrite is not None:
        on_rewrite(found.matched, builder.created, pairs)
    readers = [use.node for _, new in pairs for use in new.uses]
    return [*builder.created, *readers]


def _record_origins(builder: Builder, matched: Sequence[Node]) -> None:
    """A constant the rule made without saying what from is taken to come from every constant the
    match read (too many at worst: what matters is that a weight derived from parameters is known)."""
    unknown = [value for value in builder.constants if not has_origins(value)]
    if unknown:
        read = [value for node in matched for value in node.inputs]
        for value in unknown:
            record_origins(value, read)


def _shape_change(old: Value, new: Value) -> str | None:
    """How ``new`` differs in rank or a static dim from ``old``, which it is to replace; None when it
    does not (as far as their known shapes tell). A constant wrongly taken for a scalar shows here."""
    if old.shape is None or new.shape is None:
        return None
    pairs = zip(old.shape, new.shape, strict=False)
    if len(old.shape) != len(new.shape) or any(
        isinstance(a, int) and isinstance(b, int) and a != b for a, b in pairs
    ):
        return f"its shape {list(old.shape)} would become {list(new.shape)}"
    return None


def replace_value(graph: Graph, old: Value, new: Value, created: Sequence[Node]) -> None:
    """Rewires readers of ``old`` to ``new``. A value the rewrite created inherits ``old``'s name, and so
    does any node's value that takes the place of a graph output, so the written model keeps its
    value names and its interface."""
    was_output = graph.is_output(old)
    takes_over = (
        new.producer is not None
        and old.producer is not None
        and (new.producer in created or (was_output and not graph.is_output(new)))
    )
    graph.replace_all_uses(old, new)
    if takes_over:
        graph.swap_names(old, new)


def _undo(graph: Graph, builder: Builder) -> None:
    for node in reversed(builder.created):
        graph.erase(node)
    for value in builder.constants:
        del graph.constants[value.name]


def erase_dead(graph: Graph, nodes: Sequence[Node]) -> None:
    """Erases those of ``nodes`` that nothing reads, then those that only erased ones read, and so on.

    (A worklist: erasing a node can only leave the producers of its inputs unread, so only those are
    looked at again, rather than every pending node once per layer of a long matched chain.)"""
    pending = {n: None for n in nodes if n in graph}  # (a dict: erased in a deterministic order)
    unread = [n for n in pending if not _is_read(graph, n)]
    while unread:
        node = unread.pop()
        if node not in graph:
            continue  # (reached twice)
        graph.erase(node)
        for value in node.inputs:
            producer = value.producer if value is not None else None
            if producer in pending and producer in graph and not _is_read(graph, producer):
                unread.append(producer)


def _is_read(graph: Graph, node: Node) -> bool:
    return any(graph.is_used(value) for value in node.outputs)
