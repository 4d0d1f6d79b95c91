"""A readable text form of the IR, one node a line; tests assert structure on it."""

from __future__ import annotations

from typing import Any

from ..ir import Graph, Node, Tensor


def format_attr(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "(" + ",".join(format_attr(v) for v in value) + ")"
    return repr(value) if isinstance(value, float | Tensor | str) else str(value)


def format_node(node: Node) -> str:
    outputs = ", ".join(f"%{v.name}" for v in node.outputs)
    inputs = ", ".join("_" if v is None else f"%{v.name}" for v in node.inputs)
    attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(node.attrs.items()))
    text = f"{outputs} = {node.op}({inputs})"
    if attrs:
        text += f" {{{attrs}}}"
    return text + "  : " + ", ".join(v.type_text for v in node.outputs)


def format_graph(graph: Graph) -> str:
    header = ", ".join(repr(v) for v in graph.inputs)
    lines = [f"graph {graph.name}({header}) {{"]
    for value in graph.constants.values():
        lines.append(f"  %{value.name} = constant {value.const!r}")
    lines.extend(f"  {format_node(node)}" for node in graph)
    lines.append("  return " + ", ".join(f"%{v.name}" for v in graph.outputs))
    lines.append("}")
    return "\n".join(lines)


def op_counts(graph: Graph) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in graph:
        counts[node.op] = counts.get(node.op, 0) + 1
    return dict(sorted(counts.items()))
