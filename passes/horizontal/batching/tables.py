"""N features' embedding tables concatenated once, at optimize time: the one copy the batched lookups
(plain, pooled in fixed-size bags, pooled in variable-size bags) read instead of the N tables."""

from __future__ import annotations

import numpy as np

from graphopt.ir import Graph, Tensor, Value, constant_of
from graphopt.rewrite import Builder


def join_tables(
    graph: Graph, b: Builder, tables: list[Value], name: str
) -> tuple[Value, dict[Value, int], int]:
    """(the joined table, each distinct table's first row in it, its rows): each distinct table once, in
    the order of first use. The joined constant is derived from the tables, so the torch backend keeps
    it a parameter, named after them."""
    first_rows: dict[Value, int] = {}
    rows = 0
    for table in tables:
        if table not in first_rows:
            first_rows[table] = rows
            rows += table.shape[0]
    joined = np.concatenate([constant_of(t).numpy() for t in first_rows], axis=0)
    value = b.constant(
        Tensor.from_array(joined, tables[0].dtype), graph.fresh_name(name), derived_from=list(first_rows)
    )
    return value, first_rows, rows
