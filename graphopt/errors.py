"""Errors graphopt reports to its users."""

from __future__ import annotations


class BadInput(Exception):
    """Input graphopt cannot use. The message is one line: what was found, and what was expected.

    The CLI prints it on stderr and exits with code 2, without a traceback and without writing anything.
    """


class VerificationError(Exception):
    """The optimized model does not compute the same function as the original."""
