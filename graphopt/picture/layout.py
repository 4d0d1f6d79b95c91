"""A layered layout for the renderer that has no Graphviz: each box on the row below its deepest producer,
boxes ordered within a row by the mean position of their neighbours (a few sweeps down and up), which
keeps chains straight and crossings few in the small panels a picture holds."""

from __future__ import annotations

from graphlib import TopologicalSorter

SWEEPS = 4


def layered(keys: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[float, int]]:
    """(column, row) per key: row 0 at the top, columns centred on 0."""
    producers: dict[str, list[str]] = {k: [] for k in keys}
    readers: dict[str, list[str]] = {k: [] for k in keys}
    for source, target in edges:
        producers[target].append(source)
        readers[source].append(target)
    depth: dict[str, int] = {}
    for key in TopologicalSorter(producers).static_order():
        depth[key] = max((depth[p] + 1 for p in producers[key]), default=0)
    # Inputs sit just above their first reader rather than at the top of a tall panel.
    for key in keys:
        if not producers[key] and readers[key]:
            depth[key] = max(0, min(depth[r] for r in readers[key]) - 1)
    rows: dict[int, list[str]] = {}
    for key in keys:
        rows.setdefault(depth[key], []).append(key)
    position = {k: float(i) for row in rows.values() for i, k in enumerate(row)}
    levels = sorted(rows)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        for level in levels if downward else reversed(levels):
            neighbours = producers if downward else readers

            def centre(key: str, neighbours=neighbours) -> float:
                around = neighbours[key]
                return sum(position[n] for n in around) / len(around) if around else position[key]

            rows[level].sort(key=centre)
            for i, key in enumerate(rows[level]):
                position[key] = float(i)
    placed = {}
    for level, row in rows.items():
        offset = (len(row) - 1) / 2
        for i, key in enumerate(row):
            placed[key] = (i - offset, level)
    return placed
