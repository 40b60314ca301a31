"""The data flow of docs/architecture.md, checked on the import graph.

docs/architecture.md draws the graph of which package imports which ("The import graph"); this test
reads that drawing and compares it with the imports of every file, both ways, so the page cannot
drift from the code: a package may import exactly the packages drawn below it, the drawing has no
cycle, and inside a package the modules import each other without cycles too (imports under
``if TYPE_CHECKING:`` do not run and are not counted). Pure cores stay free of I/O libraries, and
Spark is used by ``engine/spark/`` alone.
"""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"

# Package -> third-party modules it must never import (pure cores stay free of I/O libraries).
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "sqlparse_ext": {
        "confluent_kafka",
        "pyspark",
        "starlette",
        "uvicorn",
        "httpx",
        "prompt_toolkit",
    },
    "kafka": {"pyspark", "starlette", "uvicorn", "prompt_toolkit", "sqlglot"},
    "shell": {"confluent_kafka", "pyspark", "starlette", "uvicorn"},
    "dbapi": {"confluent_kafka", "pyspark", "starlette", "uvicorn", "prompt_toolkit"},
    "registry": {"pyspark", "starlette", "uvicorn", "prompt_toolkit", "sqlglot"},
}
SPARK_HOME = "engine/spark"


@cache
def _folders() -> dict[str, Path]:
    """Installed package name -> its folder (pyproject's package-dir and packages)."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    roots: dict[str, str] = setup["package-dir"]
    folders = {}
    for package in setup["packages"]:
        root = max((r for r in roots if package == r or package.startswith(r + ".")), key=len)
        rest = package[len(root) :].lstrip(".").replace(".", "/")
        folders[package] = REPO / roots[root] / rest
    return folders


@cache
def _modules() -> dict[str, Path]:
    """Every module of the distribution: dotted name -> file."""
    found: dict[str, Path] = {}
    for package, folder in _folders().items():
        for path in folder.glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def _node(module: str) -> str:
    """The box of docs/architecture.md a module belongs to: headwater.X's X when X is a package,
    else ``headwater`` (the command line and the server process)."""
    parts = module.split(".")
    if len(parts) > 1 and f"headwater.{parts[1]}" in _folders():
        return parts[1]
    return "headwater"


def _runtime_imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(module imported, line) for every import that runs (not under ``if TYPE_CHECKING:``), at any
    depth (an import inside a function counts); ``from package import submodule`` counts as the
    submodule."""
    package = module if path.stem == "__init__" else module.rsplit(".", 1)[0]
    found: list[tuple[str, int]] = []

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    self.visit(child)
            else:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.extend((alias.name, node.lineno) for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.append((sub if sub in _modules() else source, node.lineno))

    Imports().visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


@cache
def _drawn() -> dict[str, set[str]]:
    """The graph drawn in docs/architecture.md, section "The import graph": one line per package,
    ``package -> imported, imported`` (nothing after the arrow: imports no other package)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## The import graph", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert block, "docs/architecture.md: no ```text block under 'The import graph'"
    graph: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        if "->" in line:
            name, _, targets = line.partition("->")
            graph[name.strip()] = {t.strip() for t in targets.split(",") if t.strip()}
    return graph


def _real() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {_node(module): set() for module in _modules()}
    for module, path in _modules().items():
        for imported, _line in _runtime_imports(path, module):
            if imported.startswith("headwater.") and _node(imported) != _node(module):
                graph[_node(module)].add(_node(imported))
    return graph


def test_the_drawn_import_graph_is_the_real_one() -> None:
    drawn, real = _drawn(), _real()
    wrong = [
        f"{name}: drawn {sorted(drawn.get(name, set()))}, imports {sorted(real.get(name, set()))}"
        for name in sorted(set(drawn) | set(real))
        if drawn.get(name) != real.get(name)
    ]
    assert not wrong, (
        "docs/architecture.md, 'The import graph', differs from the code:\n" + "\n".join(wrong)
    )


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph`, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_drawn_graph_points_one_way() -> None:
    cycle = _cycle(_drawn())
    assert cycle is None, f"docs/architecture.md draws a cycle: {' -> '.join(cycle or [])}"


@pytest.mark.parametrize("package", sorted(_folders()))
def test_no_import_cycle_inside_a_package(package: str) -> None:
    inside = {m: p for m, p in _modules().items() if m == package or m.rsplit(".", 1)[0] == package}
    graph = {
        module: {
            imported
            for imported, _line in _runtime_imports(path, module)
            if imported in inside and imported != module
        }
        for module, path in inside.items()
    }
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle in {package}: {' -> '.join(cycle or [])}"


def _cases() -> list[tuple[str, Path]]:
    return sorted(((_node(module), path) for module, path in _modules().items()), key=str)


@pytest.mark.parametrize(
    ("node", "path"), _cases(), ids=lambda v: str(v).replace(str(REPO) + "/", "")
)
def test_each_file_imports_what_its_package_may(node: str, path: Path) -> None:
    module = next(m for m, p in _modules().items() if p == path)
    allowed = _drawn().get(node, set()) | {node}
    where = path.relative_to(REPO)
    for imported, line in _runtime_imports(path, module):
        top = imported.split(".")[0]
        if f"headwater.{top}" in _folders():
            pytest.fail(f"{where}:{line} imports {imported!r}: use the headwater.* namespace")
        if top == "headwater" and imported != "headwater":
            assert _node(imported) in allowed, (
                f"{where}:{line} imports {imported}: {node} may import only {sorted(allowed)}"
            )
        assert top not in FORBIDDEN_THIRD_PARTY.get(node, set()), (
            f"{where}:{line} imports {top}, which {node} must not depend on"
        )
        if top == "pyspark":
            assert where.as_posix().startswith(SPARK_HOME + "/"), (
                f"{where}:{line} imports pyspark: only {SPARK_HOME}/ may (the engine's Spark room)"
            )


def test_every_package_is_checked() -> None:
    assert len(_folders()) >= 10 and all(folder.is_dir() for folder in _folders().values())
    assert set(_drawn()) == {_node(module) for module in _modules()}, "a package is not drawn"
