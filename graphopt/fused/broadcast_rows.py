"""Operands that broadcast over some leading dimensions of X, read row by row.

X is viewed as [rows, cols] (cols = the normalized dims). An operand of a fused op (a scale, a
bias, a residual) is stored as [groups, cols] and X's row ``r`` reads the operand's row
``(r // inner) % groups``: ``groups = 1`` is the same row for every row of X (a norm's scale),
``inner = 1, groups = rows`` is X's own shape (a residual); a per-feature scale [N, 1, D] on
X [N, B, D] is ``inner = B, groups = N``. That covers exactly the operands whose dims, right-aligned
to X's, equal X's on one contiguous block of leading dims and are 1 elsewhere.

Only the standard library: the spec (imported by the C++ build) uses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple


class RowBroadcast(NamedTuple):
    inner: int
    groups: int


def row_broadcast(operand: Sequence[int], x: Sequence[int], axis: int) -> RowBroadcast | str:
    """(inner, groups) of ``operand`` read against ``x`` normalized over [axis, rank), or why the
    operand cannot be read that way (a sentence)."""
    block = broadcast_block(operand, x, axis)
    if isinstance(block, str):
        return block
    if block is None:
        return RowBroadcast(1, 1)
    lead = list(x[: axis % len(x)])
    first, last = block
    return RowBroadcast(math.prod(lead[last + 1 :]), math.prod(lead[first : last + 1]))


def broadcast_block(operand: Sequence, x: Sequence, axis: int) -> tuple[int, int] | str | None:
    """The (first, last) leading dims of ``x`` that ``operand`` spans, None when it spans none, or
    why it cannot be read row by row. Dims may be symbolic (equal only when spelled the same) or
    None (unknown: equal to nothing)."""
    rank = len(x)
    axis = axis % rank if rank else 0
    lead, trail = list(x[:axis]), list(x[axis:])
    operand = list(operand)
    if len(operand) > rank:
        return f"has rank {len(operand)}, above X's {rank}"

    def same(a, b):
        return a is not None and a == b

    ends = operand[len(operand) - len(trail) :] if trail else []
    if len(operand) < len(trail) or not all(map(same, ends, trail)):
        return f"shape {operand} does not end in the normalized dims {trail}"
    own = [1] * (len(lead) - (len(operand) - len(trail))) + operand[: len(operand) - len(trail)]
    kept = [i for i, d in enumerate(own) if d != 1]
    if not all(same(own[i], lead[i]) for i in kept):
        return f"shape {operand} is not a broadcast of X's {list(x)}"
    if not kept:
        return None
    first, last = kept[0], kept[-1]
    if not all(same(own[i], lead[i]) for i in range(first, last + 1)):
        return f"shape {operand} broadcasts over X's {list(x)} in more than one block of dims"
    return first, last


def is_full_rows(b: RowBroadcast, rows: int) -> bool:
    """Whether ``b`` reads X's own row (the operand has X's shape, up to leading ones)."""
    return b.inner == 1 and b.groups == rows
