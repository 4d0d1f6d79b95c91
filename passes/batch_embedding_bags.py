"""batch_embedding_bags: N pooled embedding lookups, one table each, become one on one table.

A DLRM-style model pools each sparse feature's ids in its own ``nn.EmbeddingBag`` (or writes
``emb(ids).sum(1)``) and stacks the N pooled [B, D] results, with the dense features, for the
interaction. This pass concatenates the tables once, at optimize time (the only copy it makes),
stacks the N index blocks along the axis the results are combined on, adds each feature's row offset
and pools all bags with one ``embedding_bag`` (graphopt/ir/embedding_bag.py): one kernel in torch,
``Gather`` → (``Mul``) → ``ReduceSum``/``ReduceMean`` in ONNX, in place of the N lookups (in ONNX, of the
exporters' N Loops over the bags). Its [B, N, D] (or [N, B, D]) result takes the place of the N
inputs of the stack (a concat views it as [B, N·D]); the other inputs join it through a concat.

It applies to a run of at least two neighbouring inputs of one stack or concat that are bag lookups
(graphopt/horizontal/bags.py reads their forms) of one mode, one width and dtype, indices of one
shape and dtype, all with per-sample weights or none, each read only there; and only where it saves
launches (the index arithmetic is a handful of small kernels).

Indices out of range keep failing as they did, as in ``batch_embedding_lookups``: an index outside its
own table is mapped past the end of the concatenated one, where the runtime's bounds check raises
(ONNX Runtime's Gather: "out of data bounds"; torch: "index out of range"); ONNX ``Gather`` reads -V..-1
from the end of its table (kept), torch rejects negative indices (kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.horizontal.bag import Bag
from graphopt.horizontal.bags import as_bag
from graphopt.horizontal.reachability import depends_on_any
from graphopt.ir import Graph, Node, Op, Tensor, Value, constant_of
from graphopt.rewrite import Builder, Fail, NearMiss, Pass, RewriteStats
from graphopt.rewrite.driver import count_rewrite, may_rewrite, replace_value

RULE = "batch_embedding_bags"
# Kernels of the batched form besides the pooling: the indices' stack, two comparisons, an addition
# and two selections; three more (comparison, addition, selection) where negative indices wrap.
INDEX_KERNELS = 6
WRAP_KERNELS = 3


@dataclass
class Run:
    combine: Node
    start: int  # the bags are the combine's inputs start .. start + len(bags) - 1
    bags: list[Bag]


def _key(bag: Bag) -> tuple:
    return (
        bag.mode,
        bag.table.dtype,
        bag.table.shape[1],
        bag.indices.dtype,
        bag.indices.shape,
        bag.weights is None,
        bag.wraps_negative,
    )


def find_runs(graph: Graph, combine: Node) -> list[Run | Fail]:
    """Runs of neighbouring bag inputs of ``combine`` that can be pooled as one, or why not."""
    inputs = combine.inputs
    bags: list[Bag | None] = []
    for value in inputs:
        bag = as_bag(value) if value is not None else None
        only_here = bag is not None and len(value.uses) == 1 and not graph.is_output(value)
        bags.append(bag if only_here else None)
    runs: list[Run | Fail] = []
    i = 0
    while i < len(bags):
        if bags[i] is None:
            i += 1
            continue
        j = i + 1
        while j < len(bags) and bags[j] is not None and _key(bags[j]) == _key(bags[i]):
            j += 1
        if j - i >= 2:
            runs.append(_qualify(graph, Run(combine, i, bags[i:j])))
        elif j < len(bags) and bags[j] is not None:
            runs.append(
                Fail(f"bags {inputs[i].name!r} and {inputs[j].name!r} differ in mode, width or indices")
            )
        i = j
    return runs


def _qualify(graph: Graph, run: Run) -> Run | Fail:
    bags, combine = run.bags, run.combine
    if combine.attrs["axis"] >= 2:  # (each bag is [B, D])
        return Fail(f"the {combine.op} joins the bags along their last axis")
    if len({bag.nodes[0] for bag in bags}) < len(bags):
        return Fail("one bag lookup feeds more than one input")
    if sum(not isinstance(d, int) for d in bags[0].indices.shape) > 1:
        return Fail(f"indices {bags[0].indices.name!r} have more than one symbolic dim")
    runtime = [bag.indices for bag in bags] + [bag.weights for bag in bags if bag.weights is not None]
    if depends_on_any(graph, runtime, bags):
        return Fail("one bag's indices depend on another bag")
    # The original: its lookups and the combine. The batched form: the index arithmetic, the stacked
    # weights, the pooling (one _embedding_bag in torch; Gather, Mul, ReduceSum in ONNX) and a concat
    # where other inputs join it.
    weighted = bags[0].weights is not None
    before = sum(bag.kernels for bag in bags) + 1
    pooling = 1 if graph.meta.get("frontend") != "onnx" else 2 + weighted
    after = INDEX_KERNELS + WRAP_KERNELS * bags[0].wraps_negative + weighted + pooling
    after += len(bags) < len(combine.inputs)
    if before <= after:
        return Fail(f"{len(bags)} bags: batched, about {after} kernels would replace {before}")
    return run


def batch_run(graph: Graph, run: Run) -> None:
    bags, combine = run.bags, run.combine
    axis, n = combine.attrs["axis"], len(bags)
    b = Builder(graph, RULE, anchor=bags[0].nodes[0])
    tables: dict[Value, int] = {}  # each distinct table once, at its row offset
    rows = 0
    for bag in bags:
        if bag.table not in tables:
            tables[bag.table] = rows
            rows += bag.table.shape[0]
    dtype = bags[0].table.dtype
    joined = np.concatenate([constant_of(t).numpy() for t in tables], axis=0)
    # (derived from the tables: the torch backend keeps it a parameter, named after them)
    name = graph.fresh_name("embedding_bag_tables")
    table = b.constant(Tensor.from_array(joined, dtype), name, derived_from=list(tables))

    index_type = bags[0].indices.dtype
    spread = [1, 1, 1]
    spread[axis] = n  # one value per feature, broadcast over the stacked [.., N, .., L] indices

    def per_feature(values, name):
        return b.constant(np.asarray(values).reshape(spread), graph.fresh_name(name), index_type)

    sizes = per_feature([bag.table.shape[0] for bag in bags], "table_rows")
    offsets = per_feature([tables[bag.table] for bag in bags], "table_offsets")
    zero = b.constant(np.asarray(0), graph.fresh_name("zero"), index_type)
    past_end = b.constant(np.asarray(rows), graph.fresh_name("past_end"), index_type)
    indices = b.stack(*(bag.indices for bag in bags), axis=axis)
    if bags[0].wraps_negative:
        indices = b.where(b.less(indices, zero), b.add(indices, sizes), indices)
    # In range of its own table: shifted to its rows; out of range: past the end, where the runtime's
    # bounds check fails as it did on the original lookup.
    shifted = b.where(b.less(indices, sizes), b.add(indices, offsets), past_end)
    shifted = b.where(b.less(indices, zero), past_end, shifted)
    weights = None
    if bags[0].weights is not None:
        weights = b.stack(*(bag.weights for bag in bags), axis=axis)
    starts = None
    if all(isinstance(d, int) for d in shifted.shape):
        size = shifted.shape[-1]
        count = int(np.prod(shifted.shape))
        starts = b.constant(np.arange(0, count, size), graph.fresh_name("bag_offsets"), index_type)
    pooled = b.embedding_bag(table, shifted, weights, starts, mode=bags[0].mode)
    if combine.op == Op.CONCAT:  # [.., N, D] → [.., N·D]: the N results side by side
        dims = [d if isinstance(d, int) else -1 for d in pooled.shape]
        dims[axis : axis + 2] = [-1 if -1 in dims[axis : axis + 2] else dims[axis] * dims[axis + 1]]
        pooled = b.reshape(pooled, shape=tuple(dims))
    inputs = list(combine.inputs)
    before, after = inputs[: run.start], inputs[run.start + n :]
    if not before and not after:
        result = pooled
    else:
        if combine.op == Op.STACK:
            before = [b.unsqueeze(v, axes=(axis,)) for v in before]
            after = [b.unsqueeze(v, axes=(axis,)) for v in after]
        result = b.concat(*before, pooled, *after, axis=axis)
    replace_value(graph, combine.output, result, b.created)
    graph.erase(combine)
    for bag in bags:
        for node in bag.nodes:
            if node.graph is graph and not any(v.uses or graph.is_output(v) for v in node.outputs):
                graph.erase(node)


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for combine in graph.nodes_of((Op.STACK, Op.CONCAT)):
        if combine.graph is None:
            continue
        for found in find_runs(graph, combine):
            if isinstance(found, Fail):
                stats.near_misses.append(NearMiss(RULE, combine.name, found.reason))
                continue
            if not may_rewrite():
                return stats
            batch_run(graph, found)
            count_rewrite(RULE, combine.name)
            stats.counts[RULE] += 1
            break  # (the combine is gone: another run of its inputs is now on the concat that replaced it)
    return stats


PASS = Pass(
    RULE,
    "Pool N embedding bags feeding one stack or concat as one lookup on their tables concatenated once.",
    run,
)
