"""``graphopt bench MODEL.pt2``: the original and optimized model side by side on a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import TrustPickle, guarded
from .verbosity import Quiet, Verbose, level


def bench(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="A torch.export archive (.pt2).", show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the JSON record, text table and PNG chart.")
    ] = Path("bench/results"),
    iters: Annotated[int, typer.Option("--iters", help="Timed calls per variant (median reported).")] = 200,
    no_compile: Annotated[
        bool, typer.Option("--no-compile", help="Skip the torch.compile variants.")
    ] = False,
    trust_pickle: TrustPickle = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Time MODEL and its optimized version in eager PyTorch, torch.compile, ONNX Runtime (CUDA EP, with
    and without CUDA graphs) and graphopt's torch and ORT runtimes; print a table, write JSON and a PNG."""
    from ..benchmark.__main__ import run_command
    from ..frontends.pt2_pickles import pickle_trust

    level(ctx, verbose, quiet)

    def work():
        with pickle_trust(trust_pickle):
            return run_command(model, out, iters, not no_compile)

    guarded(work)
