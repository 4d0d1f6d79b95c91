"""Recognize: spelled-out linear layers, stacks, activations and norms become single ops, which
the horizontal and fusion passes match; ``restore_unfused`` gives back, as it came in, whatever
no fusion consumed (a recognizer is a means, not a result)."""

from .recognize_activations import PASS as RECOGNIZE_ACTIVATIONS
from .recognize_linear import PASS as RECOGNIZE_LINEAR
from .recognize_norms import PASS as RECOGNIZE_NORMS
from .recognize_stack import PASS as RECOGNIZE_STACK
from .restore_unfused import PASS as RESTORE_UNFUSED

__all__ = [
    "RECOGNIZE_ACTIVATIONS",
    "RECOGNIZE_LINEAR",
    "RECOGNIZE_NORMS",
    "RECOGNIZE_STACK",
    "RESTORE_UNFUSED",
]
