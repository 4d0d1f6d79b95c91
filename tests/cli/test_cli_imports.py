"""The command line sits on top of the library: no library module imports it (so no import cycle runs
through it), and its modules share only public names."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "graphopt"


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module as written, names) of each import in the file, relative ones resolved against graphopt."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def test_no_library_module_imports_the_command_line():
    cli = PACKAGE / "cli"
    for path in PACKAGE.rglob("*.py"):
        if cli in path.parents or path.name == "__main__.py":
            continue
        for module, names in imports(path):
            targets = [module] + [f"{module}.{name}" for name in names]
            assert not any(t == "graphopt.cli" or t.startswith("graphopt.cli.") for t in targets), path


def test_command_line_modules_import_no_private_names():
    for path in (PACKAGE / "cli").glob("*.py"):
        for module, names in imports(path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{path.name} imports {private} from {module}"
