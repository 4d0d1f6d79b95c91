"""The command line, run in this process."""

from typing import NamedTuple

from typer.testing import CliRunner

from graphopt.cli import app


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def graphopt_cli(*args) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)
