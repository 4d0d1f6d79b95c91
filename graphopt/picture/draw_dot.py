"""Drawing a Scene with Graphviz (pydot writes the DOT, the ``dot`` program lays it out and renders it)."""

from __future__ import annotations

import importlib.util
import shutil

from ..dependencies import INSTALL_HINTS
from ..printable import NAME_LIMIT, printable
from .scene import Box, Scene
from .style import COLOURS, FONT, legend

NAME = "graphviz"


def missing() -> str | None:
    """Why Graphviz cannot draw here, or None."""
    if shutil.which("dot") is None:
        return "Graphviz's dot program is not installed (Debian/Ubuntu: apt-get install graphviz)"
    if importlib.util.find_spec("pydot") is None:
        return f"drawing with Graphviz needs pydot, which is not installed; {INSTALL_HINTS['pydot']}"
    return None


def available() -> bool:
    return missing() is None


def render(scene: Scene, fmt: str) -> bytes:
    import pydot

    graph = pydot.Dot(
        graph_type="digraph", rankdir="TB", newrank="true", compound="true", nodesep="0.25", ranksep="0.3"
    )
    graph.set_graph_defaults(fontname=FONT, fontsize="12", labeljust="l")
    graph.set_node_defaults(
        fontname=FONT, fontsize="10", shape="box", style="rounded,filled", margin="0.08,0.04"
    )
    graph.set_edge_defaults(color="#777777", arrowsize="0.6")
    graph.set_label(_escape("\n".join(scene.header(legend(scene.kinds)))))
    graph.set_labelloc("t")
    previous: list[str] = []
    for r, row in enumerate(scene.rows):
        cluster = pydot.Cluster(f"row{r}", label=_escape(row.title), style="rounded", color="#bbbbbb")
        # dot lays the clusters of a row out right to left in the order they are declared: after, then before.
        for p, panel in reversed(list(enumerate(row.panels))):
            sub = pydot.Cluster(f"row{r}p{p}", label=_escape(panel.title), style="dashed", color="#cccccc")
            for box in panel.boxes:
                sub.add_node(_node(box))
            for source, target in panel.edges:
                sub.add_edge(pydot.Edge(source, target))
            cluster.add_subgraph(sub)
        graph.add_subgraph(cluster)
        # Stack the rows: invisible edges from the last boxes of one row to the first boxes of the next.
        firsts = [p.boxes[0].key for p in row.panels if p.boxes]
        for source in previous:
            for target in firsts:
                graph.add_edge(pydot.Edge(source, target, style="invis"))
        previous = [_sink(p) for p in row.panels if p.boxes]
    return graph.create(prog="dot", format=fmt)


def _sink(panel) -> str:
    """A box nothing in the panel reads: the bottom of the panel's layout."""
    sources = {source for source, _ in panel.edges}
    sinks = [b.key for b in panel.boxes if b.key not in sources]
    return sinks[-1] if sinks else panel.boxes[-1].key


def _node(box: Box):
    import pydot

    fill, border, text = COLOURS[box.kind]
    label = box.title if not box.detail else f"{box.title}\n{box.detail}"
    options = {"label": _escape(label), "fillcolor": fill, "color": border, "fontcolor": text}
    if box.kind == "io":
        options.update(shape="ellipse", style="filled", fontsize="9")
    elif box.kind == "fused":
        options.update(penwidth="2", fontname=f"{FONT} Bold")
    elif box.kind in ("context", "more"):
        options.update(style="rounded,filled,dashed")
    return pydot.Node(box.key, **options)


def _escape(text: str) -> str:
    """A quoted DOT string: pydot leaves quoting to us, and newlines are DOT's ``\\n``. Each line is
    printable text (control characters as escapes: dot writes them raw into an SVG, which is then no
    XML), cut to a length dot lays out, and ``&`` is an entity (dot decodes ``&#xD800;`` into bytes no
    UTF-8 reader takes)."""
    lines = [printable(line, NAME_LIMIT).replace("&", "&amp;") for line in text.split("\n")]
    body = "\n".join(lines).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'
