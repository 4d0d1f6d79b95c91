"""The symbolic sizes of a ``.pt2`` archive, checked before torch reads them.

torch.export.load turns each ``expr_str`` of the serialized program (the size expressions of dynamic
dims, such as ``Mul(Integer(2), Symbol('s77', positive=True, integer=True))``) back into a sympy
expression with ``sympy.sympify``, which evaluates the string as Python: a planted string runs any
code. torch.export.save writes them with sympy's ``srepr``, so every honest one is a tree of calls of
sympy's expression classes (and torch's own size functions) on numbers and symbol names. Each string
is parsed here, not evaluated, and refused unless it is such a tree.
"""

from __future__ import annotations

import ast
import functools
import json
import re

from ..errors import BadInput

# sympy's classes that size expressions are made of (the numbers, arithmetic, comparisons and logic
# that srepr writes), beside torch's own size functions (torch.utils._sympy.functions, read below).
_SYMPY_CALLS = frozenset((
    "Symbol", "Dummy", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Mod", "Max", "Min", "Abs",
    "floor", "ceiling", "sign", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality",
    "StrictLessThan", "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not", "Xor",
    "Piecewise", "ExprCondPair", "IntInfinity", "NegativeIntInfinity", "Infinity", "NegativeInfinity",
    "Half", "One", "Zero", "NegativeOne",
))  # fmt: skip
_SYMPY_NAMES = frozenset({"oo", "zoo", "nan", "true", "false", "S"})
# Keyword arguments of those calls: a symbol's assumptions, a float's precision.
_KEYWORDS = re.compile(r"(extended_)?(positive|negative|nonnegative|nonpositive|nonzero)|integer|real|finite"
                       r"|infinite|rational|even|odd|zero|commutative|precision|evaluate")  # fmt: skip
_SYMBOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}|-?[0-9][0-9.e+-]{0,63}")
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)
MAX_EXPRESSION_CHARS = 100_000
EXPECTED = "expected a torch.export archive written by torch.export.save"


def parse_document(path, name: str, data: bytes) -> object:
    """The JSON entry ``name`` of the archive, parsed whole (a key spelled with JSON escapes,
    "expr\u005fstr", is expr_str to torch: no check may search the raw bytes instead)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise BadInput(f"{path}: {name!r} is not valid JSON; {EXPECTED}") from None


def check_size_expressions(path, documents: dict[str, object]) -> None:
    """Raises BadInput if a JSON entry of the archive (``documents``: name -> parsed document) holds a
    size expression that is not a tree of sympy calls (which torch would evaluate as Python code)."""
    for name, document in documents.items():
        for expression in _expressions(document):
            why = why_not_plain(expression)
            if why:
                raise BadInput(
                    f"{path}: {name!r} holds a size expression that is not a sympy expression "
                    f"({why}: {expression[:80]!r}); torch.export.load would run it as Python code, so "
                    f"it is refused before torch reads it; {EXPECTED}"
                )


def _expressions(document: object) -> list[str]:
    """Every ``expr_str`` of a JSON entry (walked without recursion: the nesting is the file's choice)."""
    found, stack = [], [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "expr_str":
                    found.append(value if isinstance(value, str) else repr(value))
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def why_not_plain(expression: str) -> str | None:
    """None if ``expression`` parses as a tree of calls of sympy's size classes and torch's size
    functions on numbers and symbol names, else what in it is not."""
    allowed = _allowed_calls()
    if len(expression) > MAX_EXPRESSION_CHARS:
        return f"{len(expression)} characters long"
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "not an expression"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in allowed:
                return f"it calls {ast.unparse(node.func)[:40]!r}"
        elif isinstance(node, ast.keyword):
            if node.arg is None or not _KEYWORDS.fullmatch(node.arg):
                return f"a keyword argument {node.arg!r}"
        elif isinstance(node, ast.Name):
            if node.id not in allowed and node.id not in _SYMPY_NAMES:
                return f"the name {node.id!r}"
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and not _SYMBOL_NAME.fullmatch(node.value):
                return f"the string {node.value[:40]!r}"
            if not isinstance(node.value, str | int | float | bool):
                return f"a {type(node.value).__name__} constant"
        elif not isinstance(node, (ast.Expression, ast.Load, ast.BinOp, ast.UnaryOp, *_OPERATORS)):
            return f"a {type(node).__name__} in it"
    return None


@functools.cache
def _allowed_calls() -> frozenset[str]:
    """sympy's size classes and the names of torch's sympy functions (FloorDiv, ModularIndexing,
    CeilToInt, ...), which torch's deserializer offers sympify by name."""
    from torch.utils._sympy import functions

    return _SYMPY_CALLS | frozenset(
        name
        for name, value in vars(functions).items()
        if isinstance(value, type) and not name.startswith("_") and value.__module__ == functions.__name__
    )
