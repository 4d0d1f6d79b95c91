"""Applies rules to a fixed point and does all the surgery, so that rules never touch the graph."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..ir import Graph, GraphError, Node, Value
from .pattern import Match, match
from .rule import Builder, Decline, Fail, InPlace, Rule

log = logging.getLogger(__name__)

MAX_ROUNDS = 100


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


@dataclass
class RewriteBudget:
    """At most ``limit`` rewrites while it is active, and which one was done last.

    Bisection replays a pass up to its n-th rewrite to find the one that changed the outputs; a pass
    that rewrites outside ``apply_rules`` takes part by asking ``may_rewrite`` and calling
    ``count_rewrite``.
    """

    limit: float
    done: int = 0
    last: tuple[str, str] | None = None  # (rule, root node) of the latest rewrite


_budget: ContextVar[RewriteBudget | None] = ContextVar("rewrite_budget", default=None)


@contextlib.contextmanager
def rewrite_budget(limit: float = float("inf")) -> Iterator[RewriteBudget]:
    """Limits (and counts) the rewrites done inside the ``with`` block."""
    budget = RewriteBudget(limit)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


def may_rewrite() -> bool:
    budget = _budget.get()
    return budget is None or budget.done < budget.limit


def count_rewrite(rule: str, node: str) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.done += 1
        budget.last = (rule, node)


def apply_rules(graph: Graph, rules: Sequence[Rule]) -> RewriteStats:
    """Applies the rules until none matches. After the first round only the neighbourhood of what the
    previous round changed is searched again: a match needs a changed node within its pattern's depth."""
    stats = RewriteStats()
    misses: dict[tuple[str, str], NearMiss] = {}
    missed_at: dict[tuple[str, str], Node] = {}
    depth = max((pattern_depth(rule.root) for rule in rules), default=1)
    dirty: set[Node] | None = None  # None: every node
    for _ in range(MAX_ROUNDS):
        changed = False
        touched: list[Node] = []
        for rule in rules:
            if dirty is None:
                candidates = graph.nodes_of(rule.root.ops)
            else:  # in creation order, as nodes_of gives them, without walking every node of the op
                candidates = sorted((n for n in dirty if n.op in rule.root.ops), key=_creation_order)
            for node in candidates:
                if node not in graph:
                    continue  # erased by an earlier rewrite of this round
                found = match(rule.root, node)
                if found is None:
                    continue
                outcome = _qualify(graph, rule, found)
                if outcome is None:
                    continue  # the rule does not apply here, and nothing came close
                if isinstance(outcome, Fail):
                    misses[(rule.name, node.name)] = NearMiss(rule.name, node.name, outcome.reason)
                    missed_at[(rule.name, node.name)] = node
                    continue
                if not may_rewrite():
                    continue
                try:
                    touched += rewrite_match(graph, rule.name, outcome, rule.replace)
                except Decline as declined:
                    misses[(rule.name, node.name)] = NearMiss(rule.name, node.name, declined.reason)
                    missed_at[(rule.name, node.name)] = node
                    continue
                misses.pop((rule.name, node.name), None)
                count_rewrite(rule.name, node.name)
                stats.counts[rule.name] += 1
                changed = True
        if not changed:
            break
        dirty = _downstream([n for n in touched if n in graph], depth)
    else:
        raise GraphError(
            f"rules {[r.name for r in rules]} did not reach a fixed point in {MAX_ROUNDS} rounds"
        )
    graph.sort()
    # A near miss at a node that a later rewrite removed is no longer a miss.
    stats.near_misses = [m for key, m in misses.items() if missed_at[key] in graph]
    return stats


def _creation_order(node: Node) -> int:
    return node.seq


def pattern_depth(pattern) -> int:
    inputs = getattr(pattern, "inputs", ())
    return 1 + max((pattern_depth(p) for p in inputs), default=0)


def _downstream(nodes: list[Node], depth: int) -> set[Node]:
    """The nodes within ``depth`` reads of ``nodes`` (themselves included): where new matches can root."""
    found = set(nodes)
    frontier = list(nodes)
    for _ in range(depth):
        frontier = [use.node for node in frontier for value in node.outputs for use in value.uses]
        frontier = [n for n in frontier if n not in found]
        found.update(frontier)
    return found


def _qualify(graph: Graph, rule: Rule, found: Match) -> Match | Fail | None:
    if not rule.allow_external_uses:
        reason = external_use(graph, found.matched, found.root)
        if reason:
            return Fail(reason)
    try:
        return rule.check(found)
    except GraphError as error:  # the matched nodes break what the rule relies on (an axis out of range
        return Fail(str(error))  # in a damaged model): no rewrite, and a near miss that says why


def external_use(graph: Graph, matched: Sequence[Node], root: Node) -> str | None:
    """Why the values inside a match cannot disappear, or None when they can."""
    inside = set(matched)
    for node in matched:
        if node is root:
            continue
        for value in node.outputs:
            if graph.is_output(value):
                return f"{value.name!r} is a graph output"
            for use in value.uses:
                if use.node not in inside:
                    return f"{value.name!r} is also read by {use.node.op} {use.node.name!r}"
    return None


def rewrite_match(graph: Graph, rule_name: str, found: Match, replace) -> list[Node]:
    """Runs ``replace`` and swaps its results in for what it replaces; returns the nodes it changed:
    the new ones and those that now read a replacement."""
    builder = Builder(graph, rule_name, anchor=found.root)
    try:
        results = replace(builder, found)
    except Decline:
        _undo(graph, builder)
        raise
    root = found.root
    if isinstance(results, InPlace):
        if builder.created:
            raise GraphError(f"rule {rule_name} built nodes and also changed {root.name!r} in place")
        _update_in_place(graph, root, results)
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
    replaced = {old for old, _ in pairs}
    for old in root.outputs:
        if old not in replaced and graph.is_used(old):
            raise GraphError(f"rule {rule_name} dropped {old.name!r}, which is still read")
    for old, new in pairs:
        replace_value(graph, old, new, builder.created)
    erase_dead(graph, found.matched)
    readers = [use.node for _, new in pairs for use in new.uses]
    return [*builder.created, *readers]


def _update_in_place(graph: Graph, node: Node, update: InPlace) -> None:
    """New attributes (and inputs) for ``node``. It is no longer what the frontend read, so a backend
    writes it from its canonical form, as it would a node a rule built."""
    if update.inputs is not None:
        count = len(update.inputs)
        if tuple(node.inputs[:count]) == tuple(update.inputs):
            graph.truncate_inputs(node, count)
        else:
            for index in range(len(node.inputs) - 1, -1, -1):
                graph.set_input(node, index, None)
            node._inputs = [None] * count
            for index, value in enumerate(update.inputs):
                if value is not None:
                    graph.set_input(node, index, value)
    node.attrs = dict(update.attrs)
    node.source = None


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
    pending = [n for n in nodes if n in graph]
    while pending:
        dead = [n for n in pending if not any(graph.is_used(v) for v in n.outputs)]
        if not dead:
            return
        for node in dead:
            graph.erase(node)
        pending = [n for n in pending if n in graph]
