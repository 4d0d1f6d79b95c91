"""The ``graphopt`` command: its subcommands, the options they all take, and its entry point."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from .. import __version__
from .bench import bench
from .common import EXIT_TERMINATED, Terminated, console
from .optimize import optimize
from .show import show
from .verbosity import QUIET, Quiet, Verbose, Verbosity, level
from .verify import verify

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="graphopt: a graph-rewriting optimizer for ONNX models and torch.export programs.",
)


def _version(value: bool) -> None:
    if value:
        console().print(f"graphopt {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    ctx.obj = Verbosity(verbose, quiet)


app.command("optimize")(optimize)
app.command("verify")(verify)
app.command("show")(show)
app.command("bench")(bench)


@app.command()
def passes(ctx: typer.Context, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """List the passes, in pipeline order (with -q: their names only)."""
    from rich.table import Table

    from ..pipeline import PIPELINE

    if level(ctx, verbose, quiet) == QUIET:  # the names alone, one a line, for scripts
        console().print("\n".join(step.name for step in PIPELINE), highlight=False)
        return
    table = Table(title="graphopt passes (in order)", title_justify="left")
    table.add_column("pass")
    table.add_column("what it does")
    for step in PIPELINE:
        table.add_row(step.name, step.description)
    console().print(table)


def _terminate(signum, frame) -> None:
    raise Terminated


def main() -> None:
    # SIGTERM unwinds like Ctrl-C: temporary files are removed and the exit code says what happened.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app(prog_name="graphopt")
    except Terminated:  # (outside a command's work: while starting up, say)
        raise SystemExit(EXIT_TERMINATED) from None
