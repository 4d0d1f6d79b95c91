"""Turns graphs into a Scene: whole graphs when small, fused regions and their neighbours when not."""

from __future__ import annotations

from ..ir import Graph
from .labels import op_title
from .regions import diff_regions, fused_regions
from .scene import Panel, Row, Scene, group_alike, panel, region_row

MAX_NODES = 60  # past this (parallel copies folded), a graph is drawn as its fused regions only
MAX_ROWS = 12  # kinds of region drawn; the rest are counted in a note


def build_scene(
    after: Graph,
    before: Graph | None = None,
    *,
    names: tuple[str, str] = ("", ""),
    max_nodes: int = MAX_NODES,
) -> Scene:
    """The picture of ``after`` (an optimized graph, or any graph) and, given ``before``, of what changed."""
    if before is None:
        return _single(after, names[1], max_nodes)
    regions, others = diff_regions(before, after)
    title = f"{names[0]}: {len(before)} nodes → {names[1]}: {len(after)} nodes"
    notes = [f"{len(regions)} fused or recognized region(s)"]
    if others:
        notes.append(f"{others} other node(s) folded into constants or removed (not drawn)")
    if len(before) <= max_nodes and len(after) <= max_nodes:
        replaced = {n for r in regions for n in r.before}
        new = {n for r in regions for n in r.after}
        panels = [
            panel(before, list(before), replaced, "replaced", "before", "b"),
            panel(after, list(after), new, "new", "after", "a"),
        ]
        return Scene(title, notes, [Row("whole graph", panels)])
    return Scene(title, notes, _region_rows(regions, before, after, notes))


def _single(graph: Graph, name: str, max_nodes: int) -> Scene:
    regions = fused_regions(graph)
    title = f"{name}: {len(graph)} nodes"
    notes = [f"{len(regions)} fused region(s)"]
    fused = {n for r in regions for n in r.after}
    if len(graph) <= max_nodes or not regions:
        # Parallel copies fold into one box each: a graph of many identical slices is small drawn.
        whole = panel(graph, list(graph), fused, "new", name, "g", rest_kind="plain")
        if _drawn_nodes(whole) <= max_nodes:
            return Scene(title, notes, [Row("whole graph", [whole])])
    if not regions:
        first = list(graph)[:max_nodes]
        rest = list(graph)[max_nodes:]
        ops = ", ".join(sorted({op_title(n.op) for n in rest}))
        notes.append(
            f"no fused ops; the first {len(first)} nodes in order are drawn, the last {len(rest)} are "
            f"not ({ops}): raise --max-nodes to draw them"
        )
        return Scene(
            title, notes, [Row("first nodes", [panel(graph, first, set(), "plain", name, "g", "plain")])]
        )
    return Scene(title, notes, _region_rows(regions, None, graph, notes))


def _drawn_nodes(drawn: Panel) -> int:
    return sum(1 for box in drawn.boxes if box.kind != "io")


def _region_rows(regions, before: Graph | None, after: Graph, notes: list[str]) -> list[Row]:
    kinds = group_alike(regions)
    if len(kinds) > MAX_ROWS:
        notes.append(f"{len(kinds) - MAX_ROWS} more kind(s) of region not drawn")
    return [region_row(before, after, region, i, count) for i, (region, count) in enumerate(kinds[:MAX_ROWS])]
