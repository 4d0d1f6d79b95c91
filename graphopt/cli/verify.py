"""``graphopt verify ORIGINAL OPTIMIZED``: do two models compute the same outputs?

Exit 0 when they agree, 1 when they do not, 2 when either is not a usable model or the two are not
comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..printable import NAME_LIMIT, rich_text
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
    tolerances,
    write_json,
)
from .verbosity import QUIET, Quiet, Verbose, level


def verify(
    ctx: typer.Context,
    original: Annotated[Path, typer.Argument(help="The original model (.onnx or .pt2).", show_default=False)],
    optimized: Annotated[Path, typer.Argument(help="The model to check against it.", show_default=False)],
    inputs: CheckInputs = None,
    seed: Seed = 0,
    input_shape: InputShapes = None,
    tolerance: Tolerances = None,
    report_json: Annotated[
        Path | None,
        typer.Option(
            "--report-json",
            help="Also write the verdict as JSON here; '-' writes it to standard output (and the table "
            "to standard error).",
        ),
    ] = None,
    trust_pickle: TrustPickle = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Check that OPTIMIZED computes what ORIGINAL computes (exit 0), or show where not (exit 1)."""
    from ..verification.compare import verify_models

    chosen = level(ctx, verbose, quiet)
    tables = console(stderr=report_json is not None and str(report_json) == STDOUT)

    def work():
        check_report_path(report_json)
        return verify_models(
            original,
            optimized,
            inputs=inputs,
            seed=seed,
            input_shapes=input_shapes(input_shape),
            tolerances=tolerances(tolerance),
            trust_pickle=trust_pickle,
            other_outputs={"--report-json": report_json} if report_json is not None else {},
        )

    verdict = guarded(work)
    if report_json is not None:
        from ..report import versions

        guarded(lambda: write_json(report_json, {"versions": versions(), **verdict}))
    if chosen > QUIET:
        tables.print(verdict_table(verdict))
        if verdict["ok"]:
            tables.print(f"[green]the models agree[/green] ({rich_text(verdict['summary'])})")
        else:
            tables.print(f"[red]the models differ[/red]: {rich_text(verdict['summary'])}", soft_wrap=True)
    if not verdict["ok"]:
        raise typer.Exit(EXIT_MISMATCH)


def verdict_table(verdict: dict[str, Any]):
    from rich.table import Table

    table = Table(title="outputs", title_justify="left")
    for column in ("output", "dtype", "shape", "max abs", "max rel", "rtol", "atol", "ok"):
        table.add_column(column, justify="right" if column.startswith(("max", "rtol", "atol")) else "left")
    for entry in verdict["outputs"]:
        numbers = [
            f"{entry[key]:.3g}" if key in entry else "-" for key in ("max_abs", "max_rel", "rtol", "atol")
        ]
        shape = "x".join(map(str, entry["shape"])) or "scalar"
        mark = "[green]yes[/green]" if entry["ok"] else "[red]no[/red]"
        table.add_row(rich_text(entry["name"], NAME_LIMIT), entry["dtype"], shape, *numbers, mark)
    return table
