"""batch_embedding_lookups: N embedding lookups, one table each, become one lookup on one table.

A recommendation model looks each sparse feature up in its own table (``nn.Embedding``: an ONNX
``Gather`` on an initializer, an ``aten.embedding``) and runs the same ops on every result before
stacking them. This pass concatenates the tables once, at optimize time (the only copy it makes; the
original tables are no longer read), adds each feature's row offset to its indices, and looks all of
them up at once: [N, *indices, D]. Each feature's result becomes a gather of its row of that batch,
which is exactly the split source ``batch_split_chains`` batches from, so the per-feature chains
become one batched chain after it.

It applies only where that batching will follow: the lookups feed, through identical chains, every
input of one stack/concat. And only where it saves launches: the indices' stack and the one lookup
are two kernels, so two lookups with nothing after them stay as they are.

The one lookup is graphopt's ``EmbeddingLookups`` (graphopt/fused/embedding_lookups/): one kernel
maps each feature's indices to its rows of the concatenated table and copies them. Indices out of
range keep doing what they did: an index outside *its own* table is never a neighbour's row; it does
what the original lookup did in each runtime (an error; on ONNX Runtime's CUDA EP, a row of zeros: the
op's spec lists them). ONNX ``Gather`` reads -V..-1 from the end of its table (kept);
``aten.embedding`` rejects negative indices (kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.fused.embedding_lookups import EMBEDDING_LOOKUPS
from graphopt.ir import DType, Graph, Node, Op, Value, constant_of, opaque_name
from graphopt.ir.ops import VIEWS
from graphopt.rewrite import (
    Builder,
    Fail,
    NearMiss,
    Pass,
    RewriteStats,
    count_rewrite,
    may_rewrite,
    replace_value,
)

from .batching.chains import Chain, first_difference, members, signature, trace_chain
from .batching.reachability import depends_on
from .batching.tables import join_tables

RULE = "batch_embedding_lookups"
ATEN_EMBEDDING = opaque_name("aten", "embedding.default")
INDEX_TYPES = frozenset({DType.INT64, DType.INT32})
# Kernels the batched form adds: the indices' stack; the one lookup (EmbeddingLookups) comes on top.
INDEX_KERNELS = 1


@dataclass(frozen=True)
class Lookup:
    node: Node
    table: Value  # a constant [rows, dim]
    indices: Value
    wraps_negative: bool  # ONNX Gather: -rows..-1 count from the end; aten.embedding: out of range


def as_lookup(value: Value) -> Lookup | None:
    """The embedding lookup that produces ``value``, or None if it is not one."""
    node = value.producer
    if node is None or len(node.outputs) != 1:
        return None
    if node.op == Op.GATHER and len(node.inputs) == 2:
        wraps = True
        if node.input(0).rank is None or node.attrs.get("axis", 0) % max(node.input(0).rank, 1) != 0:
            return None
    elif node.op == ATEN_EMBEDDING and len(node.inputs) == 2:
        wraps = False
    else:
        return None
    table, indices = node.input(0), node.input(1)
    if table is None or indices is None or constant_of(table) is None or table.rank != 2:
        return None
    if constant_of(indices) is not None or indices.dtype not in INDEX_TYPES or indices.shape is None:
        return None
    return Lookup(node, table, indices, wraps)


@dataclass
class Group:
    combine: Node
    lookups: list[Lookup]
    chains: list[Chain]


def find_group(graph: Graph, combine: Node) -> Group | Fail | None:
    """Lookups that feed every input of ``combine`` through identical chains, or why they cannot be
    batched (None when the inputs are not lookups at all: nothing worth reporting)."""
    if len(combine.inputs) < 2:
        return None
    chains = []
    for value in combine.inputs:
        chain = trace_chain(graph, value, combine)
        if isinstance(chain, Fail):
            return None
        chains.append(chain)
    lookups = [as_lookup(c.piece) for c in chains]
    if sum(lookup is not None for lookup in lookups) < 2:
        return None
    if any(lookup is None for lookup in lookups):
        others = sum(lookup is None for lookup in lookups)
        return Fail(f"{others} of the {combine.op}'s inputs are not embedding lookups")
    if len({lookup.node.op for lookup in lookups}) != 1:
        return Fail("the lookups are of different kinds")
    if len({lookup.node for lookup in lookups}) != len(lookups):
        return Fail("one lookup feeds more than one input")
    reference = signature(chains[0])
    if any(signature(c) != reference for c in chains[1:]):
        return Fail(first_difference(chains))
    for chain in chains:
        inside = set(chain.nodes) or {combine}
        piece = chain.piece
        if graph.is_output(piece) or any(use.node not in inside for use in piece.uses):
            return Fail(f"lookup result {piece.name!r} is also read outside its chain")
    first = lookups[0]
    for lookup in lookups[1:]:
        if (lookup.indices.dtype, lookup.indices.shape) != (first.indices.dtype, first.indices.shape):
            names = f"{lookup.indices.name!r} and {first.indices.name!r}"
            return Fail(f"indices {names} differ in dtype or shape")
        if lookup.table.dtype != first.table.dtype:
            return Fail(f"tables {lookup.table.name!r} and {first.table.name!r} differ in dtype")
    if depends_on(graph, [lookup.indices for lookup in lookups], members(chains)):
        return Fail("one lookup's indices depend on another feature's chain")
    per_chain = sum(node.op not in VIEWS for node in chains[0].nodes)
    before, after = len(lookups) * (1 + per_chain), INDEX_KERNELS + 1 + per_chain
    if before <= after:
        return Fail(f"{len(lookups)} lookups: batched, about {after} kernels would replace {before}")
    return Group(combine, lookups, chains)


def batch_lookups(graph: Graph, group: Group) -> None:
    """One lookup on the concatenated tables; each feature's result a gather of its row of it."""
    lookups = group.lookups
    # (named after the first lookup, which goes: the batching that follows names its nodes after the combine)
    b = Builder(graph, RULE, anchor=lookups[0].node)
    table, tables, _ = join_tables(graph, b, [lk.table for lk in lookups], "embedding_tables")

    def per_feature(values, name):
        return b.constant(np.asarray(values, dtype=np.int64), graph.fresh_name(name), DType.INT64)

    offsets = per_feature([tables[lk.table] for lk in lookups], "table_offsets")
    sizes = per_feature([lk.table.shape[0] for lk in lookups], "table_rows")
    indices = b.stack(*(lk.indices for lk in lookups), axis=0)
    wrap = int(lookups[0].wraps_negative)
    batched = b.node(EMBEDDING_LOOKUPS.ir_op, table, indices, offsets, sizes, wrap_negative=wrap).output
    for k, lookup in enumerate(lookups):
        position = b.constant(np.asarray(k), graph.fresh_name("feature"), DType.INT64)
        replace_value(graph, lookup.node.output, b.gather(batched, position, axis=0), b.created)
        graph.erase(lookup.node)


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for combine in graph.nodes_of((Op.STACK, Op.CONCAT)):
        if combine.graph is None:
            continue
        group = find_group(graph, combine)
        if isinstance(group, Fail):
            stats.near_misses.append(NearMiss(RULE, combine.name, group.reason))
            continue
        if group is None or not may_rewrite():
            continue
        batch_lookups(graph, group)
        count_rewrite(RULE, combine.name)
        stats.counts[RULE] += 1
    return stats


PASS = Pass(
    RULE,
    "Look up N embedding tables feeding identical per-feature chains as one table concatenated once.",
    run,
)
