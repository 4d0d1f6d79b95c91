"""collapse_reshapes: a reshape of a reshape becomes one reshape; a reshape to the same shape goes.

Horizontal fusion leaves ``reshape(reshape(x, [N, B*D]), [N, B, D])``; one view is enough.
"""

from __future__ import annotations

from graphopt.ir import Op
from graphopt.rewrite import Rule, op, rewrite_pass


def pattern(x):
    return op.reshape(op.reshape(x).named("inner"))


def check_pair(match):
    outer, inner, x = match.root, match.node("inner"), match["x"]
    middle = inner.output
    spec = []
    for index, dim in enumerate(outer.attrs["shape"]):
        if dim != 0:
            spec.append(dim)
            continue
        # 0 copied the middle tensor's dim; from x it must be spelled out, unless x has it in place.
        size = middle.shape[index] if middle.shape is not None and index < len(middle.shape) else None
        if isinstance(size, int):
            spec.append(size)
        elif size is not None and x.shape is not None and index < len(x.shape) and x.shape[index] == size:
            spec.append(0)
        else:
            return None
    return match.with_info(shape=tuple(spec))


def replace_pair(b, match):
    return b.reshape(match["x"], shape=match.info["shape"])


def view_pair_pattern(x):
    views = (Op.RESHAPE, Op.SQUEEZE, Op.UNSQUEEZE)
    return op.any_of(*views)(op.any_of(*views)(x).named("inner"))


def check_view_pair(match):
    """Squeeze/unsqueeze next to a reshape: one reshape to the final shape, when it is static."""
    outer, inner = match.root, match.node("inner")
    if outer.op == inner.op == Op.RESHAPE:
        return None  # merge_reshapes handles these, symbolic dims included
    shape = outer.output.static_shape
    if shape is None:
        return None
    return match.with_info(shape=tuple(shape))


def noop_pattern(x):
    return op.reshape(x)


def check_noop(match):
    x, out = match["x"], match.root.output
    if x.shape is None or out.shape is None or tuple(x.shape) != tuple(out.shape):
        return None
    if any(d is None for d in x.shape) or (match.root.graph.is_output(out) and x.producer is None):
        return None
    return match


def replace_noop(b, match):
    return match["x"]


PASS = rewrite_pass(
    "collapse_reshapes",
    "Merge consecutive reshapes (and squeezes/unsqueezes beside them); drop reshapes that change nothing.",
    [
        Rule("merge_reshapes", pattern, replace_pair, check_pair),
        Rule("merge_views", view_pair_pattern, replace_pair, check_view_pair),
        Rule("drop_noop_reshape", noop_pattern, replace_noop, check_noop),
    ],
)
