"""``graphopt bench MODEL.pt2``: the original and optimized model side by side on a GPU."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Annotated

import typer

from .common import TrustPickle, guarded
from .verbosity import QUIET, Quiet, Verbose, level


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

    quiet_run = level(ctx, verbose, quiet) == QUIET

    def work():
        # (the benchmark prints its table; -q keeps standard output empty, the files are still written)
        silenced = contextlib.redirect_stdout(io.StringIO()) if quiet_run else contextlib.nullcontext()
        with pickle_trust(trust_pickle), silenced:
            return run_command(model, out, iters, not no_compile)

    guarded(work)
