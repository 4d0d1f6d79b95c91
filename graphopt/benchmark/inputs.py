"""Inputs for timing any model: random floats, and integer inputs that are valid token ids.

An integer input that indexes an embedding table (a gather from a constant) gets ids drawn from the
table's rows, so a language model runs on a realistic spread of rows; other integer inputs get small
non-negative values (valid indices for any non-empty axis)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphopt.errors import BadInput
from graphopt.files import model_files
from graphopt.ir import Graph, Op, Value, constant_of
from graphopt.verification.numeric import input_specs

SMALL_INTEGERS = 2


def model_feeds(
    model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Arrays by input name for ``model`` (.onnx/.pt2 path, ModelProto or ExportedProgram)."""
    graph = model_files.load(model).graph
    try:
        specs = input_specs(graph, input_shapes)
    except ValueError as error:
        raise BadInput(str(error)) from None
    rng = np.random.default_rng(seed)
    by_name = {v.name: v for v in graph.inputs}
    feeds = {}
    for name, (dtype, shape) in specs.items():
        if dtype.is_float:
            feeds[name] = rng.standard_normal(shape).astype(dtype.numpy)
        elif dtype.numpy == np.bool_:
            feeds[name] = rng.random(shape) < 0.5
        else:
            high = vocabulary_size(graph, by_name[name]) or SMALL_INTEGERS
            feeds[name] = rng.integers(0, high, size=shape).astype(dtype.numpy)
    graph.release()
    return feeds


def vocabulary_size(graph: Graph, value: Value) -> int | None:
    """Rows of the smallest constant table that ``value`` indexes (ONNX Gather, aten.embedding), if any."""
    sizes = []
    for use in value.uses:
        node = use.node
        is_lookup = node.op == Op.GATHER or "embedding" in node.op
        if not is_lookup or use.index != 1 or node.attrs.get("axis", 0) != 0:
            continue
        table = node.input(0)
        tensor = constant_of(table) if table is not None else None
        if tensor is not None and tensor.shape:
            sizes.append(int(tensor.shape[0]))
    return min(sizes) if sizes else None
