"""What every graphopt command shares: where text goes, exit codes, errors as one line, option parsing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..errors import BadInput, OutputError, VerificationError
from ..printable import printable

EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED = 143  # 128 + SIGTERM

# Where a console is not a terminal (a pipe, a file, a CI log), lines are as long as they need to be.
UNWRAPPED = 10_000
STDOUT = "-"  # the file name that means standard output, as other tools take it

# Options that optimize, verify and bench share, spelled once.
InputShapes = Annotated[
    list[str] | None,
    typer.Option("--input-shape", help="NAME:1x3x224x224, for inputs with symbolic dims (repeatable)."),
]
CheckInputs = Annotated[
    Path | None,
    typer.Option("--inputs", help="Real inputs for the check: a .npz file with one array per input name."),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the random inputs of the numeric check.")]
Tolerances = Annotated[
    list[str] | None,
    typer.Option("--tolerance", help="[DTYPE=]RTOL,ATOL for the check, e.g. float16=1e-2,1e-3 (repeatable)."),
]
TrustPickle = Annotated[
    bool,
    typer.Option(
        "--trust-pickle",
        help="Load .pt2 archives that would unpickle objects (pickles can run any code: only for "
        "files from someone you trust).",
    ),
]


def console(*, stderr: bool = False) -> Console:
    """A console on standard output (or error): the terminal's width on a terminal, else unwrapped."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else UNWRAPPED
    return Console(file=stream, width=width, stderr=stderr)


def say_error(message: str) -> None:
    """One line on stderr; what the message quotes from the input (names, runtime messages) shows its
    control characters as escapes (graphopt.printable)."""
    console(stderr=True).print(printable(message), markup=False, highlight=False, soft_wrap=True)


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt, so temporary files are removed on the way out."""


def guarded(work):
    """Runs ``work``; bad input, mismatches and interruptions become one line on stderr and an exit code."""
    try:
        return work()
    except BadInput as error:
        say_error(f"graphopt: error: {error}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except VerificationError as error:
        say_error(f"graphopt: {error}; nothing written (use --force to write anyway)")
        raise typer.Exit(EXIT_MISMATCH) from None
    except KeyboardInterrupt:
        say_error("graphopt: interrupted; nothing written")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Terminated:
        say_error("graphopt: terminated; nothing written")
        raise typer.Exit(EXIT_TERMINATED) from None
    except Exception as error:
        if os.environ.get("GRAPHOPT_DEBUG"):
            raise
        say_error(
            f"graphopt: internal error: {type(error).__name__}: {error}; nothing written "
            "(set GRAPHOPT_DEBUG=1 for a traceback, and please report it)"
        )
        raise typer.Exit(EXIT_INTERNAL) from None


def pass_names(values: list[str] | None) -> list[str]:
    """``--only a,b --only c`` → ``[a, b, c]``."""
    return [name.strip() for value in values or [] for name in value.split(",") if name.strip()]


def input_shapes(values: list[str] | None) -> dict[str, list[int]]:
    """``--input-shape x:1x3x224x224`` → ``{"x": [1, 3, 224, 224]}``."""
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


def tolerances(values: list[str] | None) -> dict:
    """``--tolerance float16=1e-2,1e-3`` → the numeric check's tolerances by dtype."""
    from ..verification.numeric import parse_tolerance

    found = {}
    for value in values or []:
        try:
            found.update(parse_tolerance(value))
        except ValueError as error:
            raise BadInput(f"--{error}") from None
    return found


def check_report_path(path: Path | None, *others: Path | None) -> None:
    """Refuses, before any work, a --report-json path that cannot be written or names another output."""
    if path is None or str(path) == STDOUT:
        return
    from ..files.atomic import check_writable

    check_writable(path, "--report-json")
    for other in others:
        if other is not None and Path(other).resolve() == path.resolve():
            raise OutputError(f"--report-json {path} is where the model is written; expected another path")


def write_json(path: Path, data: Any) -> None:
    """The report as JSON: into ``path``, atomically, or on standard output for ``-``."""
    text = json.dumps(data, indent=2) + "\n"
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from ..files.atomic import write_text_atomic

    write_text_atomic(path, text)
