"""Drawing a Scene with matplotlib, for machines without Graphviz: the layered layout of layout.py, panels
side by side within a row, rows stacked. Text stays text in SVG, so the picture can be searched."""

from __future__ import annotations

import io

from ..printable import printable
from .layout import layered
from .scene import Box, Panel, Scene
from .style import COLOURS, FONT, legend

NAME = "matplotlib"
BOX_W, BOX_H, GAP_X, GAP_Y = 2.1, 0.52, 0.35, 0.42  # inches
PANEL_GAP, ROW_GAP, HEADER = 0.8, 0.9, 0.5


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _measure(panel: Panel):
    places = layered([b.key for b in panel.boxes], panel.edges)
    columns = [c for c, _ in places.values()] or [0.0]
    rows = [r for _, r in places.values()] or [0]
    width = (max(columns) - min(columns)) * (BOX_W + GAP_X) + BOX_W
    height = (max(rows) + 1) * (BOX_H + GAP_Y)
    return places, min(columns), width, height


def render(scene: Scene, fmt: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    measured = [[_measure(p) for p in row.panels] for row in scene.rows]
    row_heights = [max(m[3] for m in row) + HEADER for row in measured]
    widths = [sum(m[2] for m in row) + PANEL_GAP * (len(row) - 1) for row in measured]
    top = 0.35 * (len(scene.notes) + 2)
    fig_w = max([*widths, 7.0]) + 0.6
    fig_h = top + sum(row_heights) + ROW_GAP * len(scene.rows) + 0.3
    fonts = {"svg.fonttype": "none", "font.family": "sans-serif", "font.sans-serif": [FONT, "DejaVu Sans"]}
    with matplotlib.rc_context(fonts):
        fig = plt.figure(figsize=(fig_w, fig_h))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, fig_w)
        ax.set_ylim(fig_h, 0)  # y grows downward, like reading
        ax.axis("off")
        for i, line in enumerate(scene.header(legend(scene.kinds))):
            size, weight = (11, "bold") if i == 0 else (8.5, None)
            _text(ax, 0.3, 0.3 + 0.3 * i, line, fontsize=size, weight=weight, va="top")
        y = top + 0.2
        for row, row_measures, height in zip(scene.rows, measured, row_heights, strict=True):
            _text(ax, 0.3, y, row.title, fontsize=10, weight="bold", va="top")
            x = 0.3
            for panel, (places, left, width, _) in zip(row.panels, row_measures, strict=True):
                _panel(ax, panel, places, x - left * (BOX_W + GAP_X), y)
                x += width + PANEL_GAP
            y += height + ROW_GAP
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=110)
        plt.close(fig)
    return buffer.getvalue()


def _panel(ax, panel: Panel, places, x: float, y: float) -> None:
    """Draws one panel whose column 0 is at ``x`` and whose title is at ``y``."""
    from matplotlib.patches import FancyArrowPatch

    _text(ax, x + min((c for c, _ in places.values()), default=0) * (BOX_W + GAP_X), y + 0.25, panel.title,
            fontsize=8.5, style="italic", va="top", color="#555555")  # fmt: skip
    centres = {
        key: (x + c * (BOX_W + GAP_X) + BOX_W / 2, y + HEADER + r * (BOX_H + GAP_Y) + BOX_H / 2)
        for key, (c, r) in places.items()
    }
    for source, target in panel.edges:
        (x0, y0), (x1, y1) = centres[source], centres[target]
        arrow = FancyArrowPatch((x0, y0 + BOX_H / 2), (x1, y1 - BOX_H / 2), arrowstyle="-|>",
                                mutation_scale=8, color="#777777", lw=0.8, shrinkA=0, shrinkB=1)  # fmt: skip
        ax.add_patch(arrow)
    for box in panel.boxes:
        _box(ax, box, *centres[box.key])


def _box(ax, box: Box, cx: float, cy: float) -> None:
    from matplotlib.patches import FancyBboxPatch

    fill, border, text = COLOURS[box.kind]
    rounding = 0.25 if box.kind == "io" else 0.08
    ax.add_patch(
        FancyBboxPatch((cx - BOX_W / 2, cy - BOX_H / 2), BOX_W, BOX_H,
                       boxstyle=f"round,pad=0.02,rounding_size={rounding}", facecolor=fill, edgecolor=border,
                       lw=2 if box.kind == "fused" else 0.9,
                       linestyle="--" if box.kind in ("context", "more") else "-")
    )  # fmt: skip
    weight = "bold" if box.kind == "fused" else None
    title_y = cy - 0.08 if box.detail else cy
    _text(ax, cx, title_y, _fit(box.title), ha="center", va="center", fontsize=8, color=text, weight=weight)
    if box.detail:
        _text(ax, cx, cy + 0.12, _fit(box.detail), ha="center", va="center", fontsize=6.5, color=text)


def _text(ax, x: float, y: float, text: str, **style) -> None:
    """Text from the model as it reads: control characters as escapes (graphopt.printable, else the SVG
    is not well-formed XML), and ``$`` as a dollar sign, not the start of a formula."""
    ax.text(x, y, printable(text), parse_math=False, **style)


def _fit(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
