"""drop_noop_casts: a Cast to the dtype its input already has is an identity; its readers read the input.

Model code converts unconditionally (T5's norm computes its variance from ``hidden.to(torch.float32)``
whatever the model's dtype), and the TorchScript exporter writes that as a Cast even in a float32 model.
Left in, the Cast sits between a residual add and the norm and hides the pair from ``fuse_add_norm``.
"""

from __future__ import annotations

from graphopt.rewrite import Rule, op, rewrite_pass

from .forward_input import why_not_forwarded


def pattern(x):
    return op.cast(x)


def check(match):
    node, x = match.root, match["x"]
    if x.dtype is None or node.attrs.get("to") != x.dtype:
        return None  # a real conversion
    return why_not_forwarded(node, x) or match


def replace(b, match):
    return match["x"]


PASS = rewrite_pass(
    "drop_noop_casts",
    "Remove Casts to the dtype their input already has.",
    [Rule("drop_noop_cast", pattern, replace, check)],
)
