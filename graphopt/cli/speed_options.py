"""The speed guard's command-line options (``graphopt optimize --measure``), kept beside each other."""

from __future__ import annotations

from typing import Annotated

import typer

MeasureOption = Annotated[
    str | None,
    typer.Option(
        "--measure",
        metavar="cpu|cuda",
        help="Time the original and optimized model on this device (cpu or cuda) before writing; refuse "
        "(exit 1) a model slower beyond the measured noise.",
    ),
]
KeepPayingOption = Annotated[
    bool,
    typer.Option(
        "--keep-paying-passes",
        help="With --measure: instead of refusing a slower model, drop the passes whose removal makes it "
        "faster, and write the model of the passes that paid.",
    ),
]
