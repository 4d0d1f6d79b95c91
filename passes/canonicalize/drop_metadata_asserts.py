"""drop_metadata_asserts: remove run-time checks that a value has the dtype the IR already gives it.

A traced ``x.to(dtype)`` leaves ``_assert_tensor_metadata(x, dtype=..., device=..., layout=...)``
beside the conversion. Each check reads x, so a residual add or a norm whose result it checks looks
read outside any region a fusion would take, and nothing fuses.

Removing one is safe. The frontend makes a check an ``assert_metadata`` node only where it asserts
what x's traced value says, so it can fail only if x had another dtype at run time than when traced.
It cannot: the program's own input checks refuse inputs of another dtype, every op's result dtype
follows from its inputs' dtypes, and no pass replaces a value by one of another dtype (a fused op
writes the dtype of the value it replaces). The device and layout it also checks are those of the
traced run; left in, they would only make the program fail after a ``.to(device)``.
"""

from __future__ import annotations

from graphopt.ir import Graph, Op
from graphopt.rewrite import Pass, RewriteStats


def run(graph: Graph) -> RewriteStats:
    stats = RewriteStats()
    for node in graph.nodes_of(Op.ASSERT_METADATA):
        if node.input(0).dtype != node.attrs["dtype"]:
            continue  # (what the frontend never makes: a check the IR's types do not already answer)
        graph.erase(node)
        stats.counts["drop_metadata_assert"] += 1
    return stats


PASS = Pass(
    "drop_metadata_asserts",
    "Remove run-time checks that a value has the dtype, device and layout it was traced with.",
    run,
)
