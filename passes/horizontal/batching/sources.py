"""Where the N pieces come from, and how to get all of them as one tensor with a batch axis.

* one split into equal pieces: a reshape that splits the axis in two (no data moves);
* equal, contiguous slices of one value: a slice of the covered range (if partial) and that reshape;
* gathers of constant indices 0..N-1 along an axis of size N: the value itself;
* unrelated values (independent chains): one stack, the only copy the rewrite adds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from graphopt.ir import Node, Op, Value, constant_of
from graphopt.rewrite import Builder, Fail

from .batch_ops import Batched
from .chains import Chain

SPLIT_LIKE = frozenset({Op.SPLIT, Op.SLICE, Op.GATHER})


@dataclass
class Source:
    kind: str
    build: Callable[[Builder], Batched]
    consumed: list[Node] = field(default_factory=list)


def piece_shared(chains: list[Chain]) -> str | None:
    """Why the chains cannot own their pieces (one piece read by two chains), or None."""
    seen: set[Value] = set()
    for chain in chains:
        if chain.piece in seen:
            return f"piece {chain.piece.name!r} is used by more than one chain"
        seen.add(chain.piece)
    return None


def read_elsewhere(chains: list[Chain], combine: Node) -> bool:
    """Whether some piece is also read outside its own chain. Its split (slice, gather) then stays
    for those readers, while the batched chain reads the source through a free view as before."""
    for chain in chains:
        members = set(chain.nodes) or {combine}
        if any(use.node not in members for use in chain.piece.uses):
            return True
    return False


def split_source(chains: list[Chain]) -> Source | Fail | None:
    """The split-like source of the pieces, a reason it cannot be used, or None if there is none."""
    producers = [c.piece.producer for c in chains]
    if any(p is None or p.op not in SPLIT_LIKE for p in producers):
        return None
    kinds = {p.op for p in producers}
    if len(kinds) != 1:
        return Fail(f"pieces come from different ops: {', '.join(sorted(kinds))}")
    kind = kinds.pop()
    if kind == Op.SPLIT:
        return _from_split(chains)
    if kind == Op.SLICE:
        return _from_slices(chains)
    return _from_gathers(chains)


def _split_axis(b: Builder, x: Value, axis: int, count: int, width: int) -> Value:
    """``x`` with dim ``axis`` (count * width long) viewed as [count, width]."""
    tail = list(x.shape[axis + 1 :])
    if sum(not isinstance(d, int) for d in tail) > 1:
        raise ValueError("more than one symbolic dim after the split axis")
    tail = [d if isinstance(d, int) else -1 for d in tail]
    return b.reshape(x, shape=(*([0] * axis), count, width, *tail))


def _from_split(chains: list[Chain]) -> Source | Fail:
    split = chains[0].piece.producer
    if any(c.piece.producer is not split for c in chains):
        return Fail("pieces come from different splits")
    x, axis, sizes = split.input(0), split.attrs.get("axis"), split.attrs.get("sizes")
    if sizes is None or len(split.inputs) != 1:
        return Fail(f"split {split.name!r} has no constant sizes")
    order = [c.piece.index for c in chains]
    if len(set(order)) != len(order):
        return Fail(f"a piece of {split.name!r} is used by more than one chain")
    if len(order) != len(split.outputs):
        return Fail(f"{len(order)} of the {len(split.outputs)} pieces of {split.name!r} are combined")
    if order != list(range(len(order))):
        return Fail(f"pieces of {split.name!r} are combined out of order ({order})")
    if len(set(sizes)) != 1:
        return Fail(f"piece widths differ: {', '.join(map(str, sizes))}")
    dim = x.shape[axis] if x.shape is not None else None
    if isinstance(dim, int) and sum(sizes) != dim:
        return Fail(f"split sizes add up to {sum(sizes)}, not {dim}")
    if x.shape is None or sum(not isinstance(d, int) for d in x.shape[axis + 1 :]) > 1:
        return Fail(f"shape of {x.name!r} is not known well enough to reshape")

    def build(b: Builder) -> Batched:
        return Batched(_split_axis(b, x, axis, len(sizes), sizes[0]), axis)

    return Source("split", build, [split])


def _from_slices(chains: list[Chain]) -> Source | Fail:
    slices = [c.piece.producer for c in chains]
    x = slices[0].input(0)
    if any(s.input(0) is not x or len(s.inputs) != 1 or "starts" not in s.attrs for s in slices):
        return Fail("pieces are not constant slices of one value")
    if any(len(s.attrs["axes"]) != 1 or s.attrs["steps"] != (1,) for s in slices):
        return Fail("pieces are slices of several axes or with steps")
    axes = {s.attrs["axes"][0] for s in slices}
    if len(axes) != 1:
        return Fail("pieces slice different axes")
    axis = axes.pop()
    starts = [s.attrs["starts"][0] for s in slices]
    widths = {s.attrs["ends"][0] - s.attrs["starts"][0] for s in slices}
    if len(widths) != 1:
        return Fail(f"slice widths differ: {sorted(widths)}")
    width = widths.pop()
    if starts != [starts[0] + i * width for i in range(len(starts))]:
        return Fail("slices are not contiguous and in order")
    begin, end = starts[0], starts[0] + width * len(slices)
    dim = x.shape[axis] if x.shape is not None else None
    if x.shape is None or sum(not isinstance(d, int) for d in x.shape[axis + 1 :]) > 1:
        return Fail(f"shape of {x.name!r} is not known well enough to reshape")

    def build(b: Builder) -> Batched:
        covered = x
        if not (begin == 0 and end == dim):
            covered = b.slice(x, axes=(axis,), starts=(begin,), ends=(end,), steps=(1,))
        return Batched(_split_axis(b, covered, axis, len(slices), width), axis)

    return Source("slice", build, slices)


def _from_gathers(chains: list[Chain]) -> Source | Fail:
    gathers = [c.piece.producer for c in chains]
    x = gathers[0].input(0)
    axis = gathers[0].attrs.get("axis")
    indices = []
    for gather in gathers:
        index = constant_of(gather.input(1)) if gather.input(1) is not None else None
        if gather.input(0) is not x or gather.attrs.get("axis") != axis or index is None or index.shape != ():
            return Fail("pieces are not gathers of constant scalar indices from one value")
        indices.append(int(index.scalar()))
    if x.shape is None:
        return Fail(f"rank of {x.name!r} is unknown")
    axis = axis % len(x.shape)
    if indices != list(range(len(gathers))) or x.shape[axis] != len(gathers):
        return Fail(f"gathered indices {indices} do not cover axis {axis} of {x.name!r} in order")

    def build(b: Builder) -> Batched:
        return Batched(x, axis)

    return Source("gather", build, gathers)


def value_source(chains: list[Chain]) -> Source | Fail:
    """Independent chains: their inputs are stacked once."""
    pieces = [c.piece for c in chains]
    first = pieces[0]
    if any(p.dtype != first.dtype or p.shape != first.shape for p in pieces):
        return Fail("the chains' inputs differ in dtype or shape")

    def build(b: Builder) -> Batched:
        return Batched(b.stack(*pieces, axis=0), 0)

    return Source("values", build, [])
