"""The ``graphopt`` domain is graphopt's own: a model may define functions for its fused ops only as
graphopt writes them.

graphopt reads a node of its domain named like a fused op (NormAct, NormActLinear, ...) as that op,
and a runtime with graphopt's library registered runs graphopt's kernel for it, whatever the model's
own function for the node computes. A model that defines such a function itself (another operation
that happens to share the name) would be rewritten as if the node were graphopt's, and the numeric
check, which runs the original with the library too, could not see the difference. Such a model is
refused; a model graphopt wrote (its nodes' functions are the ones ``attach_functions`` builds) is read
as before.
"""

from __future__ import annotations

import onnx

from graphopt.errors import BadInput
from graphopt.fused.onnx_decompose import CAST_LIKE_OPSET
from graphopt.fused.onnx_functions import (
    FUSED_OP_BY_NAME,
    build_function,
    default_opset,
    fill_of_overload,
    graphopt_nodes,
    input_elem_types,
    variant_key,
    variant_of,
)
from graphopt.fused.spec import DOMAIN


def check_own_functions(model: onnx.ModelProto, where: str) -> None:
    """Raises BadInput where a node of graphopt's domain calls a model-local function in that domain
    that is not the one graphopt writes for the node's attributes and ports."""
    # (each function's body once, as it computes: thousands of nodes may call a few functions)
    defined = {
        (f.name, f.overload): _body(f)
        for f in model.functions
        if f.domain == DOMAIN and f.name in FUSED_OP_BY_NAME
    }
    if not defined:
        return
    try:
        opset = default_opset(model)
        elem_types = input_elem_types(model) if opset < CAST_LIKE_OPSET else {}
        expected: dict[tuple, bytes] = {}
        for node in graphopt_nodes(model):
            body = defined.get((node.op_type, node.overload))
            if body is None:
                continue
            elem_type, fill = elem_types.get(node.input[0]), fill_of_overload(node.overload)
            key = (*variant_key(node, elem_type), fill)
            if key not in expected:
                variant = variant_of(node, opset, elem_type, fill)
                expected[key] = _body(build_function(variant))
            if body != expected[key]:
                overload = f" (overload {node.overload!r})" if node.overload else ""
                raise BadInput(
                    f"{where}: node {node.name or node.op_type!r} calls the model's own function "
                    f"{DOMAIN}.{node.op_type}{overload}, which is not graphopt's {node.op_type} for its "
                    f"attributes; the {DOMAIN!r} domain is reserved for graphopt's fused ops: rename the "
                    "function's domain"
                )
    except ValueError as error:  # (a node graphopt cannot read as its op at all)
        raise BadInput(f"{where}: {error}") from None


def _body(function: onnx.FunctionProto) -> bytes:
    """The function as it computes (its doc string aside)."""
    copy = onnx.FunctionProto()
    copy.CopyFrom(function)
    copy.doc_string = ""
    return copy.SerializeToString(deterministic=True)
