"""Pictures of graphs: the whole graph when small, the fused regions before and after when large.

    from graphopt.picture import render
    render("model.onnx", "model.svg", optimized="model.opt.onnx")   # or optimize=True, in memory

Graphviz's ``dot`` lays the picture out where it is installed; otherwise matplotlib draws it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from .build import MAX_NODES, build_scene

log = logging.getLogger(__name__)

FORMATS = ("svg", "png")
ENGINES = ("auto", "graphviz", "matplotlib")


@dataclass
class Rendered:
    path: Path
    engine: str
    rows: int


def render(
    model: Any,
    output: str | os.PathLike,
    *,
    optimized: Any = None,
    optimize: bool = False,
    max_nodes: int = MAX_NODES,
    engine: str = "auto",
    trust_pickle: bool = False,
) -> Rendered:
    """Draws ``model`` (a path, ModelProto or ExportedProgram) into ``output`` (.svg or .png).

    With ``optimized`` (the same model after graphopt) or ``optimize=True`` (run the pipeline here, without
    the numeric check) the picture shows what the optimizer changed. ``trust_pickle``: load .pt2
    archives that would unpickle objects.
    """
    from ..files import model_files
    from ..files.atomic import atomic_target, check_writable
    from ..frontends.pt2_pickles import pickle_trust

    output = Path(output)
    fmt = output.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise BadInput(f"cannot draw into {output.name!r}; expected a .svg or .png file")
    check_writable(output, "the picture")
    draw = _engine(engine)
    with pickle_trust(trust_pickle):
        source = model_files.load(model)
        other = model_files.load(optimized) if optimized is not None else None
    before = None
    names = (source.label, source.label)
    for loaded in (source, other):
        if loaded is not None:
            model_files.refuse_input_files(loaded, {"the picture": output})
    if other is not None:
        before, after, names = source.graph, other.graph, (source.label, other.label)
    elif optimize:
        from ..pipeline import PIPELINE, run_passes

        with pickle_trust(trust_pickle):
            before, after = source.graph, model_files.load(model).graph
        run_passes(after, PIPELINE)
        names = (source.label, "optimized")
    else:
        after = source.graph
    scene = build_scene(after, before, names=(_short(names[0]), _short(names[1])), max_nodes=max_nodes)
    data = draw.render(scene, fmt)
    with atomic_target(output) as temp:
        temp.write_bytes(data)
    log.info("drew %d row(s) of %s into %s with %s", len(scene.rows), names[1], output, draw.NAME)
    return Rendered(output, draw.NAME, len(scene.rows))


def _engine(name: str):
    from . import draw_dot, draw_mpl

    if name not in ENGINES:
        raise BadInput(f"unknown engine {name!r}; expected one of: {', '.join(ENGINES)}")
    if name in ("auto", "graphviz") and draw_dot.available():
        return draw_dot
    if name == "graphviz":
        raise BadInput(draw_dot.missing())
    if draw_mpl.available():
        return draw_mpl
    raise BadInput(
        "drawing needs Graphviz's dot program (apt-get install graphviz) "
        "or matplotlib (pip install 'graphopt[show]')"
    )


def _short(label: str) -> str:
    return Path(label).name if not label.startswith("<") else label
