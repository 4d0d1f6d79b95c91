"""The strings of a ``.pt2`` program that torch turns into Python code, checked before torch reads them.

Beyond its size expressions (pt2_expressions), a serialized program hands torch strings that end up in
code it generates and runs, or in names it imports:

* value, graph and subgraph names, and the targets of nodes and of the signature's parameters and
  buffers: FX writes them into the ``forward`` source it execs (an input named ``x=__import__(...)``
  becomes a default argument; a subgraph name with quotes breaks out of ``getattr(self, "...")``);
* ``guards_code``: ``program.module()`` pastes each entry into a function it execs and calls;
* pytree specs: a context holding ``{"__enum__": ...}`` makes torch import a module by name, as does a
  ``defaultdict``'s factory (only ``builtins`` and ``collections`` factories are taken);
* ``_call_custom_autograd_function_in_pre_dispatch`` nodes import an autograd function by name and
  apply it to whatever ``as_operator`` argument follows; higher-order ops such as ``wrap`` call their
  operator argument, and Python's ``operator.attrgetter`` chained so reaches any object.

torch.export.save writes identifiers, dotted operator names, module paths, comparisons of tensor sizes
and plain pytree contexts; anything else is refused with one line before torch reads the archive.
"""

from __future__ import annotations

import ast
import json
import re

from ..errors import BadInput

EXPECTED = "expected a torch.export archive written by torch.export.save"
_NAME_KEYS = frozenset({"name", "as_name"})  # (a value's, a named argument's, a subgraph's name)
_DOTTED = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")  # (what an operator's name is)
# Module paths: a module's name in its parent is any string without a dot (torchvision's RegNet names
# its blocks "block1-0", a ModuleDict takes any key). FX writes a part that is not an identifier as
# getattr(self, "part"): a quote or backslash could break out of that string, a control character
# break the line; anything else is inert inside it.
_MODULE_PATH_KEYS = frozenset(
    {"parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "fqn"}
)
_MODULE_PART = r"[^.\"'\\\x00-\x1f\x7f]+"
_MODULE_PATH = re.compile(rf"{_MODULE_PART}(\.{_MODULE_PART})*")
# An operator argument (what a higher-order op calls) must be a torch op: Python's operator functions
# (attrgetter, itemgetter) chained through a higher-order op that calls its argument reach any object.
_TORCH_OP = re.compile(r"torch\.ops\.[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+")
_IMPORTING_TARGETS = ("_call_custom_autograd_function",)
# Higher-order ops that call whatever they are given, which torch.export does not write.
_CALLING_TARGETS = frozenset(
    f"torch.ops.higher_order.{op}"
    for op in ("wrap", "tag_activation_checkpoint", "wrap_activation_checkpoint", "flat_apply",
               "invoke_leaf_function", "dynamo_bypassing_wrapper")
)  # fmt: skip
# What a guard may be: comparisons and arithmetic of tensor sizes, strides and numbers, reached as
# L['input'].size()[0] (the names torch gives the inputs).
_GUARD_NODES = (
    ast.Expression, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Subscript,
    ast.Call, ast.Attribute, ast.Name, ast.Load, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
    ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE,
    ast.Gt, ast.GtE,
)  # fmt: skip
_GUARD_ATTRIBUTES = frozenset({"size", "stride", "storage_offset", "dim"})
# Pytree specs and their contexts are JSON documents inside the program's strings.
_NESTED_JSON_KEYS = frozenset({"in_spec", "out_spec", "context"})
_FACTORY_MODULES = frozenset({"builtins", "collections"})


def check_program_code(path, name: str, data: bytes, document: object) -> None:
    """Raises BadInput if the serialized program ``data`` (entry ``name``, parsed: ``document``) holds
    a string that torch would turn into code or an import beyond what torch.export.save writes."""
    if b"__enum__" in data:
        _refuse(path, name, "a pytree spec naming an enum, which torch would import by name")
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        if "__enum__" in item:  # (the raw check above misses a key spelled with JSON escapes)
            _refuse(path, name, "a pytree spec naming an enum, which torch would import by name")
        factory = item.get("default_factory_module")
        if factory is not None and (not isinstance(factory, str) or factory not in _FACTORY_MODULES):
            _refuse(
                path,
                name,
                f"a pytree spec whose factory comes from {str(factory)[:80]!r}, which torch would import",
            )
        for key, value in item.items():
            if isinstance(value, str):
                _check_string(path, name, key, value)
                if key in _NESTED_JSON_KEYS:
                    stack.append(_nested(value))
            elif key == "guards_code" and isinstance(value, list):
                for guard in value:
                    _check_guard(path, name, guard)
            elif key.endswith("_values") and isinstance(value, dict):
                for value_name in value:
                    _check_string(path, name, "name", value_name)
                stack.append(value)
            else:
                stack.append(value)


def _nested(text: str) -> object:
    """The JSON document a spec string holds (None where it holds none: torch cannot read it either)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _check_string(path, name: str, key: str, value: str) -> None:
    # (a Python keyword is an identifier here: an op's argument may be named "from", and as a value's
    # name it could only make the generated code fail to compile, never run)
    if key in _NAME_KEYS and value and not value.isidentifier():
        _refuse(path, name, f"a {key} {value[:80]!r} that is not an identifier")
    elif key == "target" and value and not _DOTTED.fullmatch(value):
        _refuse(path, name, f"a {key} {value[:80]!r} that is not a dotted name")
    elif key in _MODULE_PATH_KEYS and value and not _MODULE_PATH.fullmatch(value):
        _refuse(path, name, f"a {key} {value[:80]!r} that is not a module path")
    elif key == "target" and any(part in value for part in _IMPORTING_TARGETS):
        _refuse(path, name, f"a call of {value[:80]!r}, which imports and runs a function by name")
    elif key == "target" and value in _CALLING_TARGETS:
        _refuse(path, name, f"a call of {value[:80]!r}, which calls whatever it is given")
    elif key == "as_operator" and not _TORCH_OP.fullmatch(value):
        _refuse(path, name, f"an operator argument {value[:80]!r} that is not a torch op")


def _check_guard(path, name: str, guard: object) -> None:
    try:
        tree = ast.parse(guard, mode="eval") if isinstance(guard, str) else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    plain = tree is not None and all(_plain_guard_node(node) for node in ast.walk(tree))
    if not plain:
        _refuse(path, name, f"a guard {str(guard)[:80]!r} that is not a comparison of sizes")


def _plain_guard_node(node: ast.AST) -> bool:
    if not isinstance(node, _GUARD_NODES):
        return False
    if isinstance(node, ast.Name):
        return node.id == "L"
    if isinstance(node, ast.Attribute):
        return node.attr in _GUARD_ATTRIBUTES
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and not node.keywords
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float | str)
    return True


def _refuse(path, name: str, what: str) -> None:
    raise BadInput(
        f"{path}: {name!r} holds {what}; torch.export.load would run it as Python code, so it is refused "
        f"before torch reads it; {EXPECTED}"
    )
