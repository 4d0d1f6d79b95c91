"""A transient progress bar over the passes, on standard error, while a long optimization runs."""

from __future__ import annotations

import sys


class pass_progress:
    """``with pass_progress(quiet) as on_pass``: ``on_pass`` for graphopt.optimize, or None when quiet
    or when standard error is not a terminal (a log gets no bar)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bar = None

    def __enter__(self):
        if self.quiet or not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from .common import console

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        )
        self.bar.start()
        task = self.bar.add_task("optimizing", total=None)

        def on_pass(index: int, total: int, name: str) -> None:
            self.bar.update(task, total=total, completed=index, description=name or "writing")

        return on_pass

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
