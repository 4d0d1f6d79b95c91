"""Errors graphopt reports to its users."""

from __future__ import annotations


class BadInput(Exception):
    """Input graphopt cannot use. The message is one line: what was found, and what was expected.

    The CLI prints it on stderr and exits with code 2, without a traceback and without writing anything.
    """


class OutputError(BadInput):
    """An output graphopt cannot write: a directory, a read-only file system, a full disk, a file the
    input reads. Reported like bad input (one line, exit code 2); nothing is left behind."""


class VerificationError(Exception):
    """The optimized model does not compute the same function as the original.

    ``report`` is the optimization's report (with the numeric check and the culprit), when there is one.
    """

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report
