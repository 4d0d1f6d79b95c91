"""The ``graphopt`` command line."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from . import __version__
from .bench_command import bench
from .errors import BadInput, VerificationError
from .show import show
from .speed_options import KeepPayingOption, MeasureOption
from .verify_command import verify

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="graphopt: a graph-rewriting optimizer for ONNX models and torch.export programs.",
)
out = Console()
err = Console(stderr=True)

EXIT_BAD_INPUT = 2
EXIT_MISMATCH = 1
EXIT_INTERNAL = 3


def _version(value: bool) -> None:
    if value:
        out.print(f"graphopt {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what graphopt does.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def _names(values: list[str] | None) -> list[str]:
    return [name.strip() for value in values or [] for name in value.split(",") if name.strip()]


def _shapes(values: list[str] | None) -> dict[str, list[int]]:
    shapes = {}
    for value in values or []:
        name, _, dims = value.rpartition(":")
        try:
            shapes[name] = [int(d) for d in dims.lower().split("x")] if dims else []
        except ValueError:
            raise BadInput(
                f"--input-shape {value!r}: expected NAME:DIMxDIM..., e.g. input:1x3x224x224"
            ) from None
        if not name:
            raise BadInput(f"--input-shape {value!r}: expected NAME:DIMxDIM..., e.g. input:1x3x224x224")
    return shapes


def _tolerances(values: list[str] | None) -> dict:
    from .numeric import parse_tolerance

    tolerances = {}
    for value in values or []:
        try:
            tolerances.update(parse_tolerance(value))
        except ValueError as error:
            raise BadInput(f"--{error}") from None
    return tolerances


@app.command()
def optimize(
    model: Annotated[Path, typer.Argument(help="The model: .onnx or .pt2.", show_default=False)],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write (default: MODEL with .opt before the suffix)."),
    ] = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only these passes (repeat or comma-separate).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Skip these passes (repeat or comma-separate).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would change; write nothing.")
    ] = False,
    report_json: Annotated[
        Path | None, typer.Option("--report-json", help="Also write the report as JSON here.")
    ] = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the numeric check of the outputs.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Write even if the numeric check fails.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs of the numeric check.")] = 0,
    input_shape: Annotated[
        list[str] | None,
        typer.Option("--input-shape", help="NAME:1x3x224x224, for inputs with symbolic dims."),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs", help="Real inputs for the check: a .npz file with one array per input name."
        ),
    ] = None,
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            "--tolerance", help="[DTYPE=]RTOL,ATOL for the check, e.g. float16=1e-2,1e-3 (repeatable)."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
    measure: MeasureOption = None,
    keep_paying_passes: KeepPayingOption = False,
) -> None:
    """Optimize MODEL and write the result beside it (never over it)."""
    from .api import optimize as run_optimize
    from .io import default_output

    def work():
        target = None if dry_run else (output or default_output(model))
        try:
            with _progress(quiet) as on_pass:
                return run_optimize(
                    model,
                    output=target,
                    only=_names(only),
                    skip=_names(skip),
                    verify=not no_verify,
                    force=force,
                    seed=seed,
                    input_shapes=_shapes(input_shape),
                    inputs=inputs,
                    tolerances=_tolerances(tolerance),
                    on_pass=on_pass,
                    measure=measure,
                    keep_paying_passes=keep_paying_passes,
                )
        except VerificationError as error:
            # The report says which rewrite broke the outputs; it is written even though the model is not.
            if report_json is not None and error.report is not None:
                _write_json(report_json, error.report.to_json())
            raise

    result = _guarded(work)
    if report_json is not None:
        _write_json(report_json, result.report.to_json())
    if not quiet:
        from .report import render

        render(result.report, out)
        if dry_run:
            out.print("dry run: nothing written")


app.command("verify")(verify)
app.command("show")(show)
app.command("bench")(bench)


@app.command()
def passes() -> None:
    """List the passes, in pipeline order."""
    from rich.table import Table

    from .pipeline import PIPELINE

    table = Table(title="graphopt passes (in order)", title_justify="left")
    table.add_column("pass")
    table.add_column("what it does")
    for step in PIPELINE:
        table.add_row(step.name, step.description)
    out.print(table)


def _write_json(path: Path, data) -> None:
    from .fsutil import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


class _progress:
    """A transient progress bar over passes on stderr, for long work."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bar = None

    def __enter__(self):
        if self.quiet or not err.is_terminal:
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err, transient=True
        )
        self.bar.start()
        task = self.bar.add_task("optimizing", total=None)

        def on_pass(index: int, total: int, name: str) -> None:
            self.bar.update(task, total=total, completed=index, description=name or "writing")

        return on_pass

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def _guarded(work):
    """Runs ``work``; bad input and mismatches become one line on stderr and an exit code."""
    try:
        return work()
    except BadInput as error:
        err.print(f"graphopt: error: {error}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except VerificationError as error:
        err.print(
            f"graphopt: {error}; nothing written (use --force to write anyway)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_MISMATCH) from None
    except KeyboardInterrupt:
        err.print("graphopt: interrupted; nothing written", markup=False)
        raise typer.Exit(130) from None
    except Exception as error:
        if os.environ.get("GRAPHOPT_DEBUG"):
            raise
        err.print(
            f"graphopt: internal error: {type(error).__name__}: {error}; nothing written "
            "(set GRAPHOPT_DEBUG=1 for a traceback, and please report it)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_INTERNAL) from None


def main() -> None:
    app(prog_name="graphopt")


if __name__ == "__main__":
    sys.exit(main())
