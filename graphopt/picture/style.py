"""Colours and shapes shared by both renderers, so a picture reads the same whichever one drew it."""

from __future__ import annotations

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
LEGEND = (
    "red: replaced nodes · green: graphopt fused ops · blue: other new nodes · "
    "white: neighbours · grey: graph inputs and outputs"
)
FONT = "Helvetica"
