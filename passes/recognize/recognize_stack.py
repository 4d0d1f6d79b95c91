"""recognize_stack: the exporters' spellings of torch.stack become one ``stack`` op.

ONNX writes ``Concat(Unsqueeze(t_i, a), axis=a)``; decomposed torch programs write either that or
``view(cat(t_i, a), [..., N, size, ...])``. Horizontal fusion then matches one form.
"""

from __future__ import annotations

from graphopt.ir import Op
from graphopt.rewrite import Rule, op, rewrite_pass

from .origin import note_origin


def concat_pattern():
    return op.concat(...)


def check_unsqueezed(match):
    concat = match.root
    axis = concat.attrs.get("axis")
    pieces = []
    for value in concat.inputs:
        producer = value.producer if value is not None else None
        if producer is None or producer.op != Op.UNSQUEEZE or len(producer.inputs) != 1:
            return None
        if producer.attrs.get("axes") != (axis,) or len(value.uses) != 1 or producer.graph.is_output(value):
            return None
        pieces.append(producer)
    match.matched.extend(pieces)
    return match.with_info(values=[p.input(0) for p in pieces], axis=axis)


def reshape_pattern():
    return op.reshape(op.concat(...).named("concat"))


def check_viewed(match):
    reshape, concat = match.root, match.node("concat")
    values = list(concat.inputs)
    first = values[0]
    if first is None or first.shape is None or reshape.output.shape is None:
        return None
    if any(v is None or v.shape != first.shape for v in values):
        return None
    axis = concat.attrs["axis"]
    expected = (*first.shape[:axis], len(values), *first.shape[axis:])
    if tuple(reshape.output.shape) != expected:
        return None
    return match.with_info(values=values, axis=axis)


def replace(b, match):
    return b.stack(*match.info["values"], axis=match.info["axis"])


PASS = rewrite_pass(
    "recognize_stack",
    "Turn Unsqueeze+Concat and cat+view spellings of stack into one stack op.",
    [
        Rule("stack_from_unsqueeze_concat", concat_pattern, replace, check_unsqueezed),
        Rule("stack_from_concat_view", reshape_pattern, replace, check_viewed),
    ],
    on_rewrite=note_origin,
)
