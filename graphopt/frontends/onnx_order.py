"""The order of an ONNX graph's nodes: ONNX asks for nodes in topological order, runtimes do not (ONNX
Runtime's own float16 converter appends its input Casts last). The loader reads nodes in an order it
computes, and the tools that read nodes in file order (ONNX's checker, shape inference and reference
evaluator) get a reordered copy."""

from __future__ import annotations

import onnx

from ..errors import BadInput


def in_topological_order(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model``, or a copy whose top-level nodes are in topological order where they were not (ONNX's
    checker, shape inference and reference evaluator read nodes in file order; runtimes sort them). A
    model whose nodes cannot be ordered comes back as it is (the loader names the cycle or the undefined
    value). Top-level names only: what a subgraph reads from outside is not followed."""
    graph = model.graph
    protos = list(graph.node)
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    reads, writes = [list(n.input) for n in protos], [list(n.output) for n in protos]
    try:
        order = topological_order(protos, reads, writes, [[] for _ in protos], defined, "model")
    except BadInput:
        return model
    return reordered(model, order)


def reordered(model: onnx.ModelProto, order: list[int]) -> onnx.ModelProto:
    """``model`` where its top-level nodes are in ``order`` already, else a copy whose nodes are."""
    if order == list(range(len(model.graph.node))):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    nodes = [onnx.NodeProto() for _ in order]
    for target, index in zip(nodes, order, strict=True):
        target.CopyFrom(model.graph.node[index])
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def topological_order(
    protos: list[onnx.NodeProto],
    inputs: list[list[str]],
    outputs: list[list[str]],
    captured: list[list[str]],
    defined: set[str],
    where: str,
) -> list[int]:
    """Node indices in an order where every input is defined first; names what is undefined or cyclic."""
    if _already_sorted(inputs, outputs, captured, defined):
        return list(range(len(protos)))
    reads = [[n for n in names if n] + extra for names, extra in zip(inputs, captured, strict=True)]
    producer = {}
    for index, names in enumerate(outputs):
        for name in names:
            if name:
                producer[name] = index
    state = [0] * len(protos)  # 0 new, 1 on the current path, 2 done
    order: list[int] = []
    for start in range(len(protos)):
        if state[start]:
            continue
        stack = [(start, iter(reads[start]))]
        state[start] = 1
        while stack:
            index, pending = stack[-1]
            for name in pending:
                if name in defined:
                    continue
                if name not in producer:
                    node = protos[index]
                    raise BadInput(
                        f"{where}: node {node.name or node.op_type!r} reads {name!r}, which no node, "
                        "input or initializer defines; expected every value to be defined"
                    )
                dep = producer[name]
                if state[dep] == 1:
                    cycle = [protos[i].name or protos[i].op_type for i, _ in stack]
                    raise BadInput(f"{where}: the graph has a cycle through nodes {' -> '.join(cycle)}")
                state[dep] = 1
                stack.append((dep, iter(reads[dep])))
                break
            else:
                stack.pop()
                state[index] = 2
                order.append(index)
                defined.update(n for n in outputs[index] if n)
    return order


def _already_sorted(
    inputs: list[list[str]], outputs: list[list[str]], captured: list[list[str]], defined: set[str]
) -> bool:
    """The common case, checked in one pass: every node reads only what is defined before it."""
    seen = set(defined)
    for names, produced, extra in zip(inputs, outputs, captured, strict=True):
        # (an omitted optional input is named "": the slower check skips it)
        if not seen.issuperset(names) and not all(name in seen for name in names if name):
            return False
        if extra and not seen.issuperset(extra):
            return False
        seen.update(produced)
    return True
