"""What is read off a graph without rewriting it, outside the rewrite core (IR, matcher, driver,
pipeline), which needs none of it to rewrite: the IR's invariants (``verify``, run after every pass
in tests and debug runs), a text form and op counts (``printer``), the values of canonical ops on
constants (``evaluate``, for constant folding) and the estimated memory traffic (``traffic``, for the
report)."""

from .evaluate import can_evaluate, evaluate
from .printer import format_graph, format_node, op_counts
from .traffic import estimate_traffic
from .verify import verify

__all__ = [
    "can_evaluate",
    "estimate_traffic",
    "evaluate",
    "format_graph",
    "format_node",
    "op_counts",
    "verify",
]
