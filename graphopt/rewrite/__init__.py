"""Rules (pattern, check, replace), the driver that applies them, and passes."""

from .driver import (
    NearMiss,
    RewriteStats,
    apply_rules,
    erase_dead,
    external_use,
    replace_value,
    rewrite_match,
)
from .passes import Pass, rewrite_pass
from .pattern import Match, NodePattern, Var, match, op
from .rule import Builder, Decline, Fail, Rule

__all__ = [
    "Builder",
    "Decline",
    "Fail",
    "Match",
    "NearMiss",
    "NodePattern",
    "Pass",
    "RewriteStats",
    "Rule",
    "Var",
    "apply_rules",
    "erase_dead",
    "external_use",
    "match",
    "op",
    "replace_value",
    "rewrite_match",
    "rewrite_pass",
]
