"""remove_identity: readers of an Identity's output read its input instead."""

from __future__ import annotations

from graphopt.rewrite import Rule, op, rewrite_pass

from .forward_input import why_not_forwarded


def pattern(x):
    return op.identity(x)


def check(match):
    return why_not_forwarded(match.root, match["x"]) or match


def replace(b, match):
    return match["x"]


PASS = rewrite_pass(
    "remove_identity",
    "Remove Identity nodes (their readers read the input directly).",
    [Rule("remove_identity", pattern, replace, check)],
)
