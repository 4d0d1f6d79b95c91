"""Rules (pattern, check, replace), the driver that applies them, and passes."""

from .driver import (
    NearMiss,
    RewriteBudget,
    RewriteStats,
    apply_rules,
    count_rewrite,
    erase_dead,
    may_rewrite,
    replace_value,
    rewrite_budget,
    rewrite_match,
    why_kept,
)
from .passes import Pass, rewrite_pass
from .pattern import Either, Match, NodePattern, Var, either, match, op
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
    "either",
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
