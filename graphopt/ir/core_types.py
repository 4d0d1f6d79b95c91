"""What the graph and its shape rules both speak of: dims, shapes, and the error of a broken graph."""

from __future__ import annotations

# A dim is a size, a symbolic name such as "batch", or None when unknown.
Dim = int | str | None
Shape = tuple[Dim, ...]


class GraphError(ValueError):
    """The graph breaks an invariant (a cycle, an undefined value, a bad edit)."""
