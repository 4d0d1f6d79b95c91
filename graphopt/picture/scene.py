"""What a picture shows, independent of how it is drawn: rows of panels of boxes and edges.

A small graph is drawn whole (before and after side by side, the replaced and new nodes coloured). A large
one shows only its fused regions, each with its neighbours one edge away, and each kind of region once
(the same fusion in every transformer layer is one row, "× 12"). Parallel copies of one chain inside a
panel (16 per-feature slices of the same ops) are drawn twice and summarized by one "… × 14 more" box.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from graphlib import TopologicalSorter

from ..ir import Graph, Node, Op
from .labels import FUSED_IR_OPS, node_detail, op_title, signature
from .regions import Region

# Parallel copies beyond this many are summarized.
KEEP_COPIES = 2


@dataclass
class Box:
    key: str
    title: str
    detail: str
    # replaced | fused | new | context | io | more | plain
    kind: str


@dataclass
class Panel:
    title: str
    boxes: list[Box] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Row:
    title: str
    panels: list[Panel]


@dataclass
class Scene:
    title: str
    notes: list[str]
    rows: list[Row]

    def header(self, legend: str) -> list[str]:
        """The lines above the picture: title, notes and (where it says anything) the legend."""
        return [self.title, *self.notes, *([legend] if legend else [])]

    @property
    def kinds(self) -> set[str]:
        """The kinds of box drawn (for the legend)."""
        return {box.kind for row in self.rows for panel in row.panels for box in panel.boxes}


def panel(
    graph: Graph,
    nodes: Iterable[Node],
    focus: set[Node],
    focus_kind: str,
    title: str,
    prefix: str,
    rest_kind: str = "context",
) -> Panel:
    """Draws ``nodes`` (focus nodes in ``focus_kind``, fused ops in green, the rest in ``rest_kind``:
    neighbours of a region, or plain nodes of a whole graph), with the graph inputs and outputs they
    touch; weights and Constant nodes are left out."""
    shown = [n for n in nodes if n.op != Op.CONSTANT]
    members = set(shown)
    result = Panel(title)
    keys: dict[Node, str] = {}
    for index, node in enumerate(shown):
        keys[node] = f"{prefix}n{index}"
        kind = "fused" if node.op in FUSED_IR_OPS else (focus_kind if node in focus else rest_kind)
        result.boxes.append(Box(keys[node], op_title(node.op), node_detail(node), kind))
    terminals: dict[str, str] = {}

    def terminal(name: str) -> str:
        if name not in terminals:
            terminals[name] = f"{prefix}t{len(terminals)}"
            result.boxes.append(Box(terminals[name], name, "", "io"))
        return terminals[name]

    inputs = {v.name for v in graph.inputs}
    for node in shown:
        for value in node.inputs:
            if value is None:
                continue
            if value.producer in members:
                result.edges.append((keys[value.producer], keys[node]))
            elif value.producer is None and value.name in inputs:
                result.edges.append((terminal(value.name), keys[node]))
        for value in node.outputs:
            if graph.is_output(value):
                result.edges.append((keys[node], terminal(value.name)))
    return fold_copies(result)


def neighbourhood(nodes: list[Node]) -> list[Node]:
    """``nodes`` and the nodes one edge away (producers of their inputs, readers of their outputs)."""
    around = dict.fromkeys(nodes)
    for node in nodes:
        for value in node.inputs:
            if value is not None and value.producer is not None:
                around.setdefault(value.producer)
        for value in node.outputs:
            for use in value.uses:
                around.setdefault(use.node)
    return list(around)


def in_order(graph: Graph, nodes: Iterable[Node]) -> list[Node]:
    wanted = set(nodes)
    return [n for n in graph if n in wanted]


def region_row(before: Graph | None, after: Graph, region: Region, index: int, copies: int) -> Row:
    label = ", ".join(region.rules) or "→ " + ", ".join(dict.fromkeys(op_title(n.op) for n in region.after))
    title = f"{label}  × {copies}" if copies > 1 else label
    panels = []
    if before is not None:
        around = in_order(before, neighbourhood(region.before))
        panels.append(panel(before, around, set(region.before), "replaced", "before", f"r{index}b"))
    around = in_order(after, neighbourhood(region.after))
    panels.append(panel(after, around, set(region.after), "new", "after", f"r{index}a"))
    return Row(title, panels)


def group_alike(regions: list[Region]) -> list[tuple[Region, int]]:
    """One representative per kind of region (same ops before and after, shapes aside), with its count."""
    groups: dict[tuple, list[Region]] = {}
    for region in regions:
        key = (
            tuple(sorted(signature(n) for n in region.before)),
            tuple(sorted(signature(n) for n in region.after)),
        )
        groups.setdefault(key, []).append(region)
    ordered = sorted(groups.values(), key=lambda g: not g[0].fused)  # fused ops first, stable otherwise
    return [(g[0], len(g)) for g in ordered]


def fold_copies(result: Panel) -> Panel:
    """Keeps KEEP_COPIES of each set of parallel, identical boxes (same op, fed alike) and folds the rest
    into one "more" box that inherits their edges."""
    producers: dict[str, list[str]] = {b.key: [] for b in result.boxes}
    for source, target in result.edges:
        producers[target].append(source)
    by_key = {b.key: b for b in result.boxes}
    # A box's structure: its op and kind, and its producers' structures (hashed, so deep graphs stay cheap).
    order = TopologicalSorter(producers).static_order()
    structure: dict[str, int] = {}
    for key in order:
        box = by_key[key]
        structure[key] = hash((box.title, box.kind, tuple(sorted(structure[p] for p in producers[key]))))
    copies: dict[int, list[str]] = {}
    for box in result.boxes:
        if box.kind != "io":
            copies.setdefault(structure[box.key], []).append(box.key)
    folded: dict[str, str] = {}
    for keys in copies.values():
        if len(keys) <= KEEP_COPIES + 1:
            continue
        more = f"{keys[0]}_more"
        box = by_key[keys[0]]
        result.boxes.append(Box(more, f"… {len(keys) - KEEP_COPIES} more {box.title}", box.detail, "more"))
        folded.update({k: more for k in keys[KEEP_COPIES:]})
    if not folded:
        return result
    result.boxes = [b for b in result.boxes if b.key not in folded]
    edges = [(folded.get(s, s), folded.get(t, t)) for s, t in result.edges]
    result.edges = list(dict.fromkeys(edges))
    return result
