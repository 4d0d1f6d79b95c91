"""verify(graph): the IR's invariants, checked after every pass in tests and debug runs."""

from __future__ import annotations

from ..ir import Graph, GraphError, Node, Shape, Use, Value, infer_outputs, is_canonical


def verify(graph: Graph) -> None:
    """Raises GraphError naming the first node that breaks an invariant."""
    defined: set[Value] = set(graph.inputs) | set(graph.constants.values())
    names: dict[str, Value] = {}
    for value in defined:
        _check_name(names, value, None)
    for node in graph:
        for index, value in enumerate(node.inputs):
            if value is None:
                continue
            if value not in defined:
                where = "later in the graph" if value.producer in graph else "outside the graph"
                _fail(node, f"reads {value.name!r}, which is defined {where}")
            if Use(node, index) not in value.uses:
                _fail(node, f"input {index} ({value.name!r}) is missing from that value's use list")
        for index, value in enumerate(node.outputs):
            if value.producer is not node or value.index != index:
                _fail(node, f"output {value.name!r} does not name this node as its producer")
            _check_name(names, value, node)
            defined.add(value)
        if is_canonical(node.op):
            _check_types(node)
    for value in defined:
        for use in value.uses:
            if use.node not in graph or use.node.input(use.index) is not value:
                raise GraphError(
                    f"verify: {value.name!r} lists a use by {use.node.name!r} that does not read it"
                )
    for value in graph.outputs:
        if value not in defined:
            raise GraphError(f"verify: graph output {value.name!r} is not a value of the graph")


def _check_name(names: dict[str, Value], value: Value, node: Node | None) -> None:
    other = names.setdefault(value.name, value)
    if other is not value:
        message = f"value name {value.name!r} is used twice"
        if node is None:
            raise GraphError(f"verify: {message}")
        _fail(node, message)


def _check_types(node: Node) -> None:
    try:
        expected = infer_outputs(node)
    except (GraphError, KeyError) as error:
        if node.source is not None:
            return  # a frontend's raw form (shape-like inputs not yet constant-folded)
        _fail(node, f"has no valid type: {error}")
    if len(expected) != len(node.outputs):
        _fail(node, f"has {len(node.outputs)} outputs, its op has {len(expected)}")
    for value, (dtype, shape) in zip(node.outputs, expected, strict=True):
        if dtype is not None and value.dtype is not None and dtype != value.dtype:
            _fail(node, f"output {value.name!r} is {value.dtype}, its inputs make it {dtype}")
        if not _shapes_agree(value.shape, shape):
            _fail(node, f"output {value.name!r} has shape {value.shape}, its inputs make it {shape}")


def _shapes_agree(recorded: Shape | None, inferred: Shape | None) -> bool:
    if recorded is None or inferred is None:
        return True
    if len(recorded) != len(inferred):
        return False
    return all(
        not (isinstance(a, int) and isinstance(b, int)) or a == b
        for a, b in zip(recorded, inferred, strict=True)
    )


def _fail(node: Node, message: str) -> None:
    raise GraphError(f"verify: node {node.name!r} ({node.op}) {message}")
