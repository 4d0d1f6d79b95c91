"""Rules (pattern, check, replace), the driver that applies them, and passes."""

from .budget import RewriteBudget, count_rewrite, may_rewrite, rewrite_budget
from .driver import (
    NearMiss,
    RewriteStats,
    apply_rules,
    erase_dead,
    replace_value,
    rewrite_match,
    why_kept,
)
from .pass_definition import Pass, rewrite_pass
from .pattern import Either, Match, NodePattern, Var, match, op
from .rule import Builder, Decline, Fail, InPlace, Rule

__all__ = [
    "Builder",
    "Decline",
    "Either",
    "Fail",
    "InPlace",
    "Match",
    "NearMiss",
    "NodePattern",
    "Pass",
    "RewriteBudget",
    "RewriteStats",
    "Rule",
    "Var",
    "apply_rules",
    "count_rewrite",
    "erase_dead",
    "match",
    "may_rewrite",
    "op",
    "replace_value",
    "rewrite_budget",
    "rewrite_match",
    "rewrite_pass",
    "why_kept",
]
