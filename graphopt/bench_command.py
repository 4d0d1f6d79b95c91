"""``graphopt bench MODEL.pt2``: the original and optimized model side by side on a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def bench(
    model: Annotated[Path, typer.Argument(help="A torch.export archive (.pt2).", show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the JSON record, text table and PNG chart.")
    ] = Path("bench/results"),
    iters: Annotated[int, typer.Option("--iters", help="Timed calls per variant (median reported).")] = 200,
    no_compile: Annotated[
        bool, typer.Option("--no-compile", help="Skip the torch.compile variants.")
    ] = False,
) -> None:
    """Time MODEL and its optimized version in eager PyTorch, torch.compile, ONNX Runtime (CUDA EP, with
    and without CUDA graphs) and graphopt's torch and ORT runtimes; print a table, write JSON and a PNG."""
    from .benchmark.__main__ import run_command
    from .cli import _guarded

    _guarded(lambda: run_command(model, out, iters, not no_compile))
