"""Running the graphopt command line (in this process, or in a subprocess where the test is about the
process itself), and what a bad-input failure must look like."""

from __future__ import annotations

import subprocess
import sys
from typing import NamedTuple

from typer.testing import CliRunner

from graphopt.cli import app


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def graphopt(*args) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def graphopt_process(*args) -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "graphopt.cli", *map(str, args)], capture_output=True, text=True, timeout=300
    )
    return Result(done.returncode, done.stdout, done.stderr)


def assert_bad_input(result: Result, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("graphopt: error: ")
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
