"""The package's modules import each other without cycles (function-level imports included), no
module imports another's underscore names, and no source file passes 400 lines.

The import graph is read from the sources with ``ast``, so an import hidden inside a function counts;
imports under ``if TYPE_CHECKING:`` never run and do not."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
# passes/ is installed as graphopt.passes (the package-dir mapping of pyproject.toml).
PACKAGES = ((ROOT / "graphopt", "graphopt"), (ROOT / "passes", "graphopt.passes"))
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for folder, prefix in PACKAGES:
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[0] == "passes" and prefix == "graphopt":
                continue  # (a link to passes/ in a source checkout)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


MODULES = _modules()


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def _import_nodes(tree: ast.AST):
    for child in ast.iter_child_nodes(tree):
        skip_body = isinstance(child, ast.If) and _under_type_checking(child)
        for node in child.orelse if skip_body else [child]:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node
            else:
                yield from _import_nodes(node)


def _imports(name: str, path: Path):
    """(module, imported name or None, line, local name or None) for every import of a module of the
    package; the imported name is None when it is itself a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None, alias.asname) for alias in node.names]
        else:
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            targets = [(module, alias.name, alias.asname or alias.name) for alias in node.names]
        for module, member, local in targets:
            if member is not None and f"{module}.{member}" in MODULES:
                yield f"{module}.{member}", None, node.lineno, local
            elif module in MODULES:
                yield module, member, node.lineno, local if member is None else None


def _import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        graph.add_node(name)
        for target, _, line, _ in _imports(name, path):
            if target != name:
                graph.add_edge(name, target, line=line)
    return graph


def test_the_graph_sees_the_modules_and_function_level_imports():
    graph = _import_graph()
    assert {"graphopt.pipeline", "graphopt.passes.fuse.fuse_norm_act", "graphopt.ir.graph"} <= set(graph)
    # (imports inside functions count: model_files imports each frontend on first use)
    assert graph.has_edge("graphopt.files.model_files", "graphopt.frontends.onnx")
    assert graph.has_edge("graphopt.pipeline", "graphopt.passes.canonicalize")


def test_no_import_cycles():
    graph = _import_graph()
    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            cycle = nx.find_cycle(graph.subgraph(component))
            cycles.append(" → ".join([a for a, _ in cycle] + [cycle[0][0]]))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _private_uses(name: str, path: Path):
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    modules = set()  # how the file reaches modules of the package: local names and dotted paths
    for target, member, line, local in _imports(name, path):
        if member is not None and _private(member) and target != name:
            yield f"{where}:{line}: imports {member} from {target}"
        if local is not None:
            modules.add(local)
        elif member is None:  # (``import graphopt.ir.graph``: read as graphopt.ir.graph, graphopt.ir, ...)
            parts = target.split(".")
            modules.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            module = _dotted(node.value)
            if module in modules and module != name:
                yield f"{where}:{node.lineno}: reads {module}.{node.attr}"


def test_the_private_name_scan_sees_each_form(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text(
        "import graphopt\n"
        "import graphopt.ir.graph\n"
        "from graphopt import api as a\n"
        "from graphopt.ir import infer\n"
        "from graphopt.rewrite.driver import _by_op\n"
        "graphopt._x, graphopt.ir.graph._y, a._z, infer._rules, infer.public, graphopt.__name__\n"
    )
    found = [use.split(": ", 1)[1] for use in _private_uses("graphopt.probe", module)]
    assert found == [
        "imports _by_op from graphopt.rewrite.driver",
        *(f"reads {r}" for r in ("graphopt._x", "graphopt.ir.graph._y", "a._z", "infer._rules")),
    ]


def test_no_module_reads_another_modules_private_names():
    found = [use for name, path in MODULES.items() for use in _private_uses(name, path)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


@pytest.mark.parametrize("folder", ["graphopt", "passes"])
def test_no_source_file_over_400_lines(folder):
    long = {
        str(path.relative_to(ROOT)): count
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"
