"""Colours and shapes shared by both renderers, so a picture reads the same whichever one drew it."""

from __future__ import annotations

from collections.abc import Iterable

# kind: (fill, border, text colour)
COLOURS = {
    "replaced": ("#fde2e1", "#c9302c", "#222222"),
    "fused": ("#d4edda", "#1e7e34", "#0b3d17"),
    "new": ("#dde8fb", "#2f62c9", "#222222"),
    "context": ("#ffffff", "#9a9a9a", "#6b6b6b"),
    "io": ("#eeeeee", "#9a9a9a", "#444444"),
    "more": ("#f6f6f6", "#9a9a9a", "#555555"),
    "plain": ("#ffffff", "#555555", "#222222"),
}
# What each colour means, in the order a legend lists them (plain nodes need no explaining).
MEANINGS = {
    "replaced": "red: replaced nodes",
    "fused": "green: graphopt fused ops",
    "new": "blue: other new nodes",
    "context": "white, dashed: neighbours",
    "more": "light grey, dashed: parallel copies folded into one box",
    "io": "grey: graph inputs and outputs",
}
FONT = "Helvetica"


def legend(kinds: Iterable[str]) -> str:
    """The legend of a picture whose boxes are of ``kinds``: only the colours it uses."""
    used = set(kinds)
    return " · ".join(text for kind, text in MEANINGS.items() if kind in used)
