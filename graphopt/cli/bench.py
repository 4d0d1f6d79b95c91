"""``graphopt bench MODEL``: the original and optimized model side by side in every runtime here."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Annotated

import typer

from .common import InputShapes, TrustPickle, guarded, input_shapes
from .verbosity import QUIET, Quiet, Verbose, level


def bench(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="The model: .onnx or .pt2.", show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the JSON record, text table and PNG chart.")
    ] = Path("bench/results"),
    device: Annotated[
        str, typer.Option("--device", help="cuda, cpu, or auto (CUDA where PyTorch finds a GPU).")
    ] = "auto",
    input_shape: InputShapes = None,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="fp32, fp16 or bf16 (a .pt2 is cast and re-exported).")
    ] = None,
    ort_model_type: Annotated[
        str | None,
        typer.Option(
            "--ort-model-type", help="Model type for ORT's transformer optimizer rows (bert, gpt2, ...)."
        ),
    ] = None,
    iters: Annotated[
        int,
        typer.Option(
            "--iters",
            help="Timed calls per row, spread over 9 rounds that interleave the rows (median over rounds "
            "reported, with its noise).",
        ),
    ] = 100,
    no_compile: Annotated[bool, typer.Option("--no-compile", help="Skip the torch.compile rows.")] = False,
    trust_pickle: TrustPickle = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Time MODEL and its optimized version in ONNX Runtime (with and without CUDA graphs), ORT's
    transformer optimizer (alone and with graphopt in both orders), eager PyTorch, torch.compile and
    graphopt through PyTorch; print a table, write JSON and a PNG chart. Rows that cannot run here are
    listed with the reason."""
    from ..frontends.pt2_pickles import pickle_trust

    quiet_run = level(ctx, verbose, quiet) == QUIET

    def work():
        from ..benchmark.any_model import bench as run
        from ..benchmark.any_output import table, write
        from ..errors import BadInput

        if device not in ("auto", "cpu", "cuda"):
            raise BadInput(f"--device {device!r}: expected auto, cpu or cuda")
        if dtype not in (None, "fp32", "fp16", "bf16"):
            raise BadInput(f"--dtype {dtype!r}: expected fp32, fp16 or bf16")
        if not model.is_file():
            raise BadInput(f"{model}: no such file (expected an .onnx model or a .pt2 archive)")
        chosen = device
        if device == "auto":
            import torch

            chosen = "cuda" if torch.cuda.is_available() else "cpu"
        modes = () if no_compile else (("default", "max-autotune") if chosen == "cuda" else ("default",))
        # -q keeps standard output empty; the JSON, table and chart files are still written.
        silenced = contextlib.redirect_stdout(io.StringIO()) if quiet_run else contextlib.nullcontext()
        with pickle_trust(trust_pickle), silenced:
            result = run(
                model,
                device=chosen,
                input_shapes=input_shapes(input_shape),
                dtype=dtype,
                iters=iters,
                compile_modes=modes,
                ort_model_type=ort_model_type,
            )
            typer.echo(table(result))
            for path in write(result, out, f"bench_{model.stem}_{chosen}"):
                typer.echo(f"wrote {path}")

    guarded(work)
