"""batch_embedding_bags: N pooled embedding lookups, one table each, become one on one table.

A DLRM-style model pools each sparse feature's ids in its own ``nn.EmbeddingBag`` (or writes
``emb(ids).sum(1)``) and stacks the N pooled [B, D] results, with the dense features, for the
interaction. This pass concatenates the tables once, at optimize time (the only copy it makes),
stacks the N index blocks along the axis the results are combined on, adds each feature's row offset
and pools all bags with one ``embedding_bag`` (graphopt/analysis/embedding_bag.py): one kernel in torch,
``Gather`` → (``Mul``) → ``ReduceSum``/``ReduceMean`` in ONNX, in place of the N lookups (in ONNX, of the
exporters' N Loops over the bags). Its [B, N, D] (or [N, B, D]) result takes the place of the N
inputs of the stack (a concat views it as [B, N·D]); the other inputs join it through a concat.

It applies to a run of at least two neighbouring inputs of one stack or concat that are bag lookups
(passes/horizontal/batching/bags.py reads their forms) of one mode, one width and dtype, indices of one
shape and dtype, all with per-sample weights or none, each read only there; and, as
``batch_embedding_lookups`` does for plain lookups, to bags that feed every input of a stack or concat
through identical per-feature chains (norm → activation, say): pooled as [N, B, D], each feature's
result a gather of its row, from which ``batch_split_chains`` batches the chains. Only where it saves
launches (the index arithmetic is a handful of small kernels).

Bags of different sizes (``nn.EmbeddingBag`` on 1-D ids with run-time offsets, empty bags and
include_last_offset included; passes/horizontal/batching/jagged.py) pool as one ``jagged_bag``
(graphopt/analysis/jagged_bag.py) over all N·B bags, [N, B, D]: the ids of all features concatenated, each
moved to its table's rows, each feature's offsets moved past the ids before it. Each form keeps its
original's reading of the offsets (torch's contract; the exporters' Loops read any offsets, as
``Slice`` does, and the pooled ONNX form reads them the same way, so the numeric check's random
offsets agree too). In torch that is one ``_embedding_bag`` and about a dozen small kernels in place
of N: it pays from N ≈ 14 on. In ONNX the exporters wrote a Loop per feature, one iteration per bag
(10 to 20 nodes each: B·N iterations in all); a single Loop over all N·B bags would cost as many
iterations, so the pooled form has no Loop: one Gather of every bag's rows and one ``ScatterND`` add
into the bags, with about 50 nodes of index arithmetic (each bag's bounds, each row's bag), whatever N
and B (graphopt/backends/jagged_bag_emit.py; opset 16 for the adds). On ONNX Runtime's CPU EP (one
thread, N = 8, B = 256, about 4 ids a bag) that took 0.7 ms a call where the TorchScript Loops took
11 ms and dynamo's 48 ms; ScatterND adds a bag's rows in order, so the sums are the Loops' exactly.

Indices out of range keep failing as they did (passes/horizontal/batching/bag_pooling.py): an index outside
its own table is mapped past the end of the concatenated one, where the runtime's bounds check raises
as on the original lookup (ONNX Runtime's Gather: "out of data bounds"; torch's embedding_bag on the
CPU: "Expected i < index_size", as nn.EmbeddingBag's own, or for bags of different sizes "Index i of
input takes value v which is not in the valid range [0, V)", with the position, value and rows of the
concatenation); ONNX ``Gather`` reads -V..-1 from the end of its table (kept), torch rejects negative
indices (kept). An id in no bag (past a short last offset) is looked up where the original looked it
up: dynamo's graph looks every id up first (an error), the TorchScript Loop only the bags' (none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.analysis.jagged_bag import ONNX_OPSET
from graphopt.ir import DType, Graph, Node, Op, Value
from graphopt.ir.ops import VIEWS
from graphopt.rewrite import Builder, Fail, NearMiss, Pass, RewriteStats
from graphopt.rewrite.driver import count_rewrite, may_rewrite, replace_value

from .batching.bag import Bag
from .batching.bag_pooling import pool, pooled_kernels
from .batching.bags import as_bag
from .batching.chains import Chain, first_difference, members, signature, trace_chain
from .batching.jagged import bag_count, pool_jagged, pooled_jagged_kernels, static_sizes
from .batching.reachability import depends_on

RULE = "batch_embedding_bags"


@dataclass
class Run:
    combine: Node
    start: int  # the bags are the combine's inputs start .. start + len(bags) - 1
    bags: list[Bag]


def _key(bag: Bag) -> tuple:
    common = (bag.mode, bag.table.dtype, bag.table.shape[1], bag.indices.dtype, bag.weights is None)
    if bag.form is None:
        return (*common, bag.wraps_negative, bag.indices.shape)
    # (bags of different sizes: as many bags per feature, however many indices)
    return (*common, bag.form, bag.last_offset, bag.offsets.dtype, bag_count(bag))


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
    if bags[0].form is None and sum(not isinstance(d, int) for d in bags[0].indices.shape) > 1:
        return Fail(f"indices {bags[0].indices.name!r} have more than one symbolic dim")
    shared = _shared_inputs(graph, bags)
    if shared is not None:
        return shared
    # The original: its lookups and the combine; the batched form: the pooled lookup, and a concat
    # where other inputs join it.
    before = sum(bag.kernels for bag in bags) + 1
    after = _pooled_kernels(graph, bags, combine.attrs["axis"]) + (len(bags) < len(combine.inputs))
    if before <= after:
        return Fail(f"{len(bags)} bags: batched, about {after} kernels would replace {before}")
    return run


def _shared_inputs(graph: Graph, bags: list[Bag]) -> Fail | None:
    """Why the bags' tables, indices or offsets cannot be pooled as one, or None."""
    if bags[0].form is not None:
        symbolic = next((bag for bag in bags if not static_sizes(bag)), None)
        if symbolic is not None:  # (the pooled form places each feature's indices at optimize time)
            return Fail(f"indices {symbolic.indices.name!r} or offsets of a symbolic length")
        opset = graph.meta.get("opset", {}).get("", ONNX_OPSET)
        if graph.meta.get("frontend") == "onnx" and opset < ONNX_OPSET:
            return Fail(f"opset {opset}: bags of different sizes pool with ScatterND adds ({ONNX_OPSET})")
    runtime = [bag.indices for bag in bags] + [bag.weights for bag in bags if bag.weights is not None]
    runtime += [bag.offsets for bag in bags if bag.offsets is not None]
    if depends_on(graph, runtime, members(bags)):
        return Fail("one bag's indices, weights or offsets depend on another bag")
    inside = {node for bag in bags for node in bag.nodes}
    for bag in bags:  # (the concatenated copy would add to the table that stays, not replace it)
        if graph.is_output(bag.table) or any(use.node not in inside for use in bag.table.uses):
            return Fail(f"table {bag.table.name!r} is also read outside its bag")
    return None


def _pooled_kernels(graph: Graph, bags: list[Bag], axis: int) -> int:
    if bags[0].form is None:
        return pooled_kernels(graph, bags)
    return pooled_jagged_kernels(graph, bags, axis)


def _pool(graph: Graph, b: Builder, bags: list[Bag], axis: int) -> Value:
    return pool(graph, b, bags, axis) if bags[0].form is None else pool_jagged(graph, b, bags, axis)


def batch_run(graph: Graph, run: Run) -> None:
    bags, combine = run.bags, run.combine
    axis, n = combine.attrs["axis"], len(bags)
    b = Builder(graph, RULE, anchor=bags[0].nodes[0])
    pooled = _pool(graph, b, bags, axis)
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
    _erase(graph, bags)


@dataclass
class Chained:
    combine: Node
    bags: list[Bag]
    chains: list[Chain]


def find_chained(graph: Graph, combine: Node) -> Chained | Fail | None:
    """Bags that feed every input of ``combine`` through identical per-feature chains (a norm and an
    activation each, say), or why they cannot be pooled as one (None: no such bags at all)."""
    chains = [trace_chain(graph, value, combine) for value in combine.inputs]
    if len(chains) < 2 or any(isinstance(c, Fail) or not c.nodes for c in chains):
        return None  # (bags that feed the combine directly are runs)
    bags = [as_bag(chain.piece) for chain in chains]
    if any(bag is None for bag in bags):
        return None
    if len({_key(bag) for bag in bags}) != 1:
        return Fail("the bags differ in mode, width, dtype, indices or weights")
    width = bags[0].table.shape[1]
    if any(chain.piece.rank != 2 or chain.piece.shape[-1] != width for chain in chains):
        # (the chains' types were inferred from it: batching them needs them right)
        return Fail(f"bag result {chains[0].piece.name!r} has no known [batch, {width}] shape")
    if any(signature(chain) != signature(chains[0]) for chain in chains[1:]):
        return Fail(first_difference(chains))
    for chain in chains:
        if graph.is_output(chain.piece) or any(use.node not in chain.nodes for use in chain.piece.uses):
            return Fail(f"bag result {chain.piece.name!r} is also read outside its chain")
    shared = _shared_inputs(graph, bags)
    if shared is not None:
        return shared
    runtime = [bag.indices for bag in bags] + [bag.weights for bag in bags if bag.weights is not None]
    runtime += [bag.offsets for bag in bags if bag.offsets is not None]
    if depends_on(graph, runtime, members([*bags, *chains])):
        return Fail("one bag's indices depend on another feature")
    per_chain = sum(node.op not in VIEWS for node in chains[0].nodes)
    before = sum(bag.kernels for bag in bags) + len(bags) * per_chain
    after = _pooled_kernels(graph, bags, 0) + per_chain
    if before <= after:
        return Fail(f"{len(bags)} bags: batched, about {after} kernels would replace {before}")
    return Chained(combine, bags, chains)


def batch_chained(graph: Graph, found: Chained) -> None:
    """One pooled lookup [N, B, D]; each feature's result a gather of its row, the split source that
    batch_split_chains then batches the per-feature chains from."""
    b = Builder(graph, RULE, anchor=found.bags[0].nodes[0])
    pooled = _pool(graph, b, found.bags, axis=0)
    for k, bag in enumerate(found.bags):
        position = b.constant(np.asarray(k), graph.fresh_name("feature"), DType.INT64)
        replace_value(graph, bag.output, b.gather(pooled, position, axis=0), b.created)
    _erase(graph, found.bags)


def _erase(graph: Graph, bags: list[Bag]) -> None:
    for bag in bags:
        for node in bag.nodes:
            if node.graph is graph and not any(v.uses or graph.is_output(v) for v in node.outputs):
                graph.erase(node)


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for combine in graph.nodes_of((Op.STACK, Op.CONCAT)):
        if combine.graph is None:
            continue
        chained = find_chained(graph, combine)
        if isinstance(chained, Fail):
            stats.near_misses.append(NearMiss(RULE, combine.name, chained.reason))
        elif chained is not None and may_rewrite():
            batch_chained(graph, chained)
            count_rewrite(RULE, combine.name)
            stats.counts[RULE] += 1
        if chained is not None:
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
