"""The ``graphopt`` command line (``graphopt --help``; ``python -m graphopt`` runs it too)."""

from __future__ import annotations

from .app import app, main

__all__ = ["app", "main"]
