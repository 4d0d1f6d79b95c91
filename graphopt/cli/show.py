"""``graphopt show``: a picture of a model, or of what the optimizer changed in it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..picture import MAX_NODES
from .common import TrustPickle, console, guarded
from .verbosity import QUIET, Quiet, Verbose, level


def show(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="The model: .onnx or .pt2.", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The picture to write: .svg or .png.")],
    optimized: Annotated[
        Path | None,
        typer.Option("--optimized", help="The optimized model: draw each fused region before and after."),
    ] = None,
    optimize: Annotated[
        bool, typer.Option("--optimize", help="Optimize MODEL in memory (no check) and draw what changed.")
    ] = False,
    max_nodes: Annotated[
        int,
        typer.Option(
            "--max-nodes",
            help="Larger graphs (counted after folding parallel copies) are drawn as their fused regions.",
        ),
    ] = MAX_NODES,
    engine: Annotated[
        str,
        typer.Option(
            "--engine", help="auto (Graphviz when installed, else matplotlib), graphviz, matplotlib."
        ),
    ] = "auto",
    trust_pickle: TrustPickle = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Draw MODEL, or with --optimized/--optimize each fused region before and after, into an SVG or PNG."""
    from ..errors import BadInput
    from ..picture import render

    chosen = level(ctx, verbose, quiet)

    def work():
        if optimized is not None and optimize:
            raise BadInput("give either --optimized OTHER or --optimize, not both")
        return render(
            model,
            output,
            optimized=optimized,
            optimize=optimize,
            max_nodes=max_nodes,
            engine=engine,
            trust_pickle=trust_pickle,
        )

    drawn = guarded(work)
    if chosen > QUIET:
        console().print(f"drew {drawn.rows} row(s) into {drawn.path} ({drawn.engine})", highlight=False)
