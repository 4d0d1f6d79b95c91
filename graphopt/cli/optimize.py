"""``graphopt optimize MODEL``: optimize, check, write, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import (
    EXIT_MISMATCH,
    STDOUT,
    CheckInputs,
    InputShapes,
    Seed,
    Tolerances,
    TrustPickle,
    check_report_path,
    console,
    guarded,
    input_shapes,
    pass_names,
    say_error,
    tolerances,
    write_json,
)
from .progress import pass_progress
from .speed_options import KeepPayingOption, MeasureOption
from .verbosity import QUIET, Quiet, Verbose, level


def optimize(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="The model: .onnx or .pt2.", show_default=False)],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write, in the input's format (default: MODEL with .opt before the suffix).",
        ),
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
        Path | None,
        typer.Option(
            "--report-json",
            help="Also write the report as JSON here; '-' writes it to standard output (and the tables "
            "to standard error).",
        ),
    ] = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the numeric check of the outputs.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write even if the numeric check fails (the exit code stays 1).")
    ] = False,
    seed: Seed = 0,
    input_shape: InputShapes = None,
    inputs: CheckInputs = None,
    tolerance: Tolerances = None,
    measure: MeasureOption = None,
    keep_paying_passes: KeepPayingOption = False,
    trust_pickle: TrustPickle = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Optimize MODEL and write the result beside it (never over it)."""
    from ..api import optimize as run_optimize
    from ..errors import VerificationError
    from ..files.model_files import data_file, default_output

    chosen = level(ctx, verbose, quiet)
    json_on_stdout = report_json is not None and str(report_json) == STDOUT
    # With the JSON on standard output, the tables go to standard error, so a pipe gets JSON alone.
    tables = console(stderr=json_on_stdout)
    target = None if dry_run else (output or default_output(model))

    def work():
        check_report_path(report_json, target, data_file(target) if target is not None else None)
        others = {} if report_json is None or json_on_stdout else {"--report-json": report_json}
        try:
            with pass_progress(chosen == QUIET) as on_pass:
                return run_optimize(
                    model,
                    output=target,
                    only=pass_names(only),
                    skip=pass_names(skip),
                    verify=not no_verify,
                    force=force,
                    seed=seed,
                    input_shapes=input_shapes(input_shape),
                    inputs=inputs,
                    tolerances=tolerances(tolerance),
                    on_pass=on_pass,
                    measure=measure,
                    keep_paying_passes=keep_paying_passes,
                    trust_pickle=trust_pickle,
                    other_outputs=others,
                )
        except VerificationError as error:
            # The report says which rewrite broke the outputs; it is written even though the model is not.
            if report_json is not None and error.report is not None:
                write_json(report_json, error.report.to_json())
            raise

    result = guarded(work)
    if report_json is not None:
        guarded(lambda: write_json(report_json, result.report.to_json()))
    if chosen > QUIET:
        from ..report import render

        render(result.report, tables)
        if dry_run:
            tables.print("dry run: nothing written")
    verification = result.report.verification
    if verification is not None and not verification.get("ok"):  # written anyway, with --force
        say_error(
            "graphopt: the optimized model computes different outputs: "
            f"{verification['summary']}; written anyway (--force)"
        )
        raise typer.Exit(EXIT_MISMATCH)
