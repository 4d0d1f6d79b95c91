"""``graphopt verify ORIGINAL OPTIMIZED``: do two models compute the same outputs?

Both are loaded (which validates them), run on the same inputs (random ones that fit ORIGINAL's
inputs, or ``--inputs`` arrays) and compared output by output with per-dtype tolerances. Exit 0 when
they agree, 1 when they do not, 2 when either is not a usable model or the two are not comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .errors import BadInput

if TYPE_CHECKING:  # (the CLI imports this module at start-up; the model libraries load on use)
    from . import io
    from .checking import Inputs


def verify_models(
    original: str | Path,
    optimized: str | Path,
    *,
    inputs: Inputs | None = None,
    seed: int = 0,
    input_shapes=None,
    tolerances=None,
) -> dict[str, Any]:
    """The verdict (JSON-ready) of comparing two model files of one kind; BadInput if they are not
    usable or not comparable."""
    from . import io
    from .checking import Reference, prepare_draws

    first = io.load(original)
    second = io.load(optimized)
    if first.frontend != second.frontend:
        kinds = {"onnx": "an ONNX model", "torch": "a torch.export archive"}
        raise BadInput(
            f"{original} is {kinds[first.frontend]} and {optimized} is {kinds[second.frontend]}; "
            "expected two models of one kind"
        )
    _check_interfaces(first, second)
    draws = prepare_draws(first.graph, inputs=inputs, seed=seed, input_shapes=input_shapes)
    # One model's weights at a time: the second graph is dropped before anything runs.
    candidate = second.original
    del second
    reference = Reference.of(first, draws, tolerances)
    del first
    verdict = reference.check(candidate)
    verdict["inputs"] = reference.describe_inputs()
    verdict["seed"] = seed
    return verdict


def _check_interfaces(first: io.Source, second: io.Source) -> None:
    want = {v.name: v.dtype for v in first.graph.inputs}
    got = {v.name: v.dtype for v in second.graph.inputs}
    if set(want) != set(got):
        raise BadInput(
            f"{second.label} has inputs {sorted(got)} but {first.label} has {sorted(want)}; "
            "expected the same inputs"
        )
    for name, dtype in want.items():
        if got[name] != dtype:
            raise BadInput(f"input {name!r} is {dtype} in {first.label} but {got[name]} in {second.label}")


def verify(
    original: Annotated[Path, typer.Argument(help="The original model (.onnx or .pt2).", show_default=False)],
    optimized: Annotated[Path, typer.Argument(help="The model to check against it.", show_default=False)],
    inputs: Annotated[
        Path | None, typer.Option("--inputs", help="A .npz file with one array per input, by input name.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    input_shape: Annotated[
        list[str] | None,
        typer.Option("--input-shape", help="NAME:1x3x224x224, for inputs with symbolic dims."),
    ] = None,
    tolerance: Annotated[
        list[str] | None,
        typer.Option("--tolerance", help="[DTYPE=]RTOL,ATOL, e.g. float16=1e-2,1e-3 (repeatable)."),
    ] = None,
    report_json: Annotated[
        Path | None, typer.Option("--report-json", help="Also write the verdict as JSON here.")
    ] = None,
) -> None:
    """Check that OPTIMIZED computes what ORIGINAL computes (exit 0), or show where not (exit 1)."""
    from .cli import EXIT_MISMATCH, _guarded, _shapes, _tolerances, _write_json, out

    verdict = _guarded(
        lambda: verify_models(
            original,
            optimized,
            inputs=inputs,
            seed=seed,
            input_shapes=_shapes(input_shape),
            tolerances=_tolerances(tolerance),
        )
    )
    if report_json is not None:
        _write_json(report_json, verdict)
    out.print(verdict_table(verdict))
    if verdict["ok"]:
        out.print(f"[green]the models agree[/green] ({verdict['summary']})")
        return
    out.print(f"[red]the models differ[/red]: {verdict['summary']}", soft_wrap=True)
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
        table.add_row(entry["name"], entry["dtype"], shape, *numbers, mark)
    return table
