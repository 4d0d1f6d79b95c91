"""Which loaded constants a constant that a pass computed was made from.

A backend that keeps kinds of state (torch.export's parameters and buffers) needs to know that a
stacked weight came from the per-slice weights it replaces, so that it stays a parameter under a name
derived from theirs. Whoever creates a constant from others records them; the record always names the
constants the frontend loaded (a constant made from made constants inherits their origins).
"""

from __future__ import annotations

from collections.abc import Iterable

from .graph import Value, constant_of

DERIVED_FROM = "derived_from"


def origins(values: Iterable[Value | None]) -> tuple[Value, ...]:
    """The loaded constants behind ``values``, in first-seen order (non-constants contribute none)."""
    found: dict[Value, None] = {}
    for value in values:
        if value is None or constant_of(value) is None:
            continue
        for origin in value.meta.get(DERIVED_FROM, (value,)):
            found[origin] = None
    return tuple(found)


def record_origins(value: Value, sources: Iterable[Value | None]) -> None:
    """Records that constant ``value`` was computed from ``sources`` (and so from their origins)."""
    value.meta[DERIVED_FROM] = origins(sources)


def has_origins(value: Value) -> bool:
    return DERIVED_FROM in value.meta
