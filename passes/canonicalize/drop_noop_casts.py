"""drop_noop_casts: a Cast to the dtype its input already has is an identity; its readers read the input.

Model code converts unconditionally (T5's norm computes its variance from ``hidden.to(torch.float32)``
whatever the model's dtype), and the TorchScript exporter writes that as a Cast even in a float32 model.
Left in, the Cast sits between a residual add and the norm and hides the pair from ``fuse_add_norm``.

``x.contiguous()`` (a torch program's ``aten.contiguous``, carried verbatim) converts the memory layout
only: the same values. SD3's transformer calls it on the patch embedding's sum, between that residual
add and the first norm. Its readers read ``x`` instead where none is a view (the program's own
``view`` calls are written back as they came) or an op carried verbatim: those may need contiguous
memory; the canonical ops the backend writes itself take any layout (reshape, never view).
"""

from __future__ import annotations

from graphopt.ir import is_canonical
from graphopt.rewrite import Fail, Rule, op, rewrite_pass

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


CONTIGUOUS = "aten:contiguous.default"


def contiguous_pattern(x):
    return op.any_of(CONTIGUOUS)(x)


def contiguous_check(match):
    node, x = match.root, match["x"]
    if node.meta.get("side_effects"):
        return None
    # (a view of the program, ``x.contiguous().view(...)``, is written back as it came: it needs the
    # contiguous memory; so may an op carried verbatim)
    layout = sorted(
        {u.op for u in node.output.users() if not is_canonical(u.op) or u.meta.get("aliases_input")}
    )
    if layout:
        return Fail(f"{node.output.name!r} is read by {', '.join(layout)}, which may need contiguous memory")
    return why_not_forwarded(node, x) or match


PASS = rewrite_pass(
    "drop_noop_casts",
    "Remove Casts to the dtype their input already has, and layout conversions canonical ops read.",
    [
        Rule("drop_noop_cast", pattern, replace, check),
        Rule("drop_contiguous", contiguous_pattern, replace, contiguous_check),
    ],
)
