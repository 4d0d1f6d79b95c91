"""How much graphopt says: ``-q`` errors only, ``-v`` what each pass did and how long each step took,
``-vv`` debug detail. Given before the subcommand or after it (``graphopt -v optimize`` or
``graphopt optimize -v``); the counts add up."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated

import typer

QUIET, NORMAL, VERBOSE, DEBUG = -1, 0, 1, 2

Verbose = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        show_default=False,
        help="Say more: -v what each pass did and timings, -vv debug detail.",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")]


@dataclass(frozen=True)
class Verbosity:
    """The options given before the subcommand, kept on the command line's context for it."""

    verbose: int = 0
    quiet: bool = False


def level(ctx: typer.Context | None, verbose: int, quiet: bool) -> int:
    """The verbosity from the options before and after the subcommand; sets up logging to match."""
    before = ctx.obj if ctx is not None and isinstance(ctx.obj, Verbosity) else Verbosity()
    chosen = QUIET if quiet or before.quiet else min(before.verbose + verbose, DEBUG)
    _configure_logging(chosen)
    return chosen


def _configure_logging(chosen: int) -> None:
    root = {QUIET: logging.ERROR, NORMAL: logging.WARNING, VERBOSE: logging.WARNING, DEBUG: logging.INFO}
    ours = {QUIET: logging.ERROR, NORMAL: logging.WARNING, VERBOSE: logging.INFO, DEBUG: logging.DEBUG}
    # (force: each command of a process, tests included, logs to the standard error it has now)
    logging.basicConfig(level=root[chosen], format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("graphopt").setLevel(ours[chosen])
