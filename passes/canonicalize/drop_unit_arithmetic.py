"""drop_unit_arithmetic: ``x * 1``, ``1 * x`` and ``x / 1`` are x; their readers read x.

Exact in every dtype (NaN, infinities and signed zeros come out as they went in). Model code divides by
a configured factor that is usually 1 (diffusers' ResNet blocks: ``(input + hidden) / output_scale_factor``),
and the TorchScript exporter and torch.export keep the division (the dynamo exporter's own optimizer
drops it): left in, it sits between the residual add and the next block's group norm and hides the pair
from ``fuse_group_norm_act``, so the fusions depended on the export path.
"""

from __future__ import annotations

from graphopt.rewrite import Rule, op, rewrite_pass

from .forward_input import why_not_forwarded


def times_one_pattern(x):
    return op.mul(x, 1.0)


def over_one_pattern(x):
    return op.div(x, 1.0)


def check(match):
    node, x = match.root, match["x"]
    if x.dtype is None or node.output.dtype != x.dtype or node.output.shape != x.shape:
        return None  # (a promotion to another dtype, or a broadcast of x: not x itself)
    return why_not_forwarded(node, x) or match


def replace(b, match):
    return match["x"]


PASS = rewrite_pass(
    "drop_unit_arithmetic",
    "Remove multiplications and divisions by one (their readers read the other operand).",
    [
        Rule("drop_multiply_by_one", times_one_pattern, replace, check),
        Rule("drop_divide_by_one", over_one_pattern, replace, check),
    ],
)
