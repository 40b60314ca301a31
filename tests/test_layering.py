"""The data flow of docs/architecture.md, checked on the import graph.

Imports point one way: sqlparse_ext -> metastore -> engine, store -> cluster
-> gateway; the clients of the HTTP API (dbapi, and shell on top of it) import none of the server,
with headwater.kafka (the Kafka edge) usable from metastore upward; engine may read
store (pull queries read materialized tables), never the reverse. A package whose
folder does not exist yet is simply not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Folder -> the headwater packages it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "sqlparse_ext": set(),
    "kafka": set(),
    "metastore": {"sqlparse_ext", "kafka"},
    "engine": {"sqlparse_ext", "metastore", "store", "kafka"},
    "store": {"sqlparse_ext", "metastore", "kafka"},
    "cluster": {"sqlparse_ext", "metastore", "store", "kafka"},
    "gateway": {"sqlparse_ext", "metastore", "engine", "store", "cluster", "kafka"},
    "dbapi": {"sqlparse_ext"},
    "shell": {"sqlparse_ext", "dbapi"},
}

# Folder -> third-party modules it must never import (pure cores stay free of I/O libraries).
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "sqlparse_ext": {"confluent_kafka", "pyspark", "starlette", "uvicorn", "httpx", "prompt_toolkit"},
    "kafka": {"pyspark", "starlette", "uvicorn", "prompt_toolkit", "sqlglot"},
    "dbapi": {"confluent_kafka", "pyspark", "starlette", "uvicorn", "prompt_toolkit"},
    "shell": {"confluent_kafka", "pyspark", "starlette", "uvicorn"},
}


def _package_of(folder: str) -> str:
    return folder.rsplit("/", 1)[-1]


def _imports(path: Path, package: str) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved within `package`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add(f"headwater.{package}")
            elif node.module:
                names.add(node.module)
    return names


def _cases() -> list[tuple[str, Path]]:
    return [
        (folder, path)
        for folder in ALLOWED
        if (REPO / folder).is_dir()
        for path in sorted((REPO / folder).rglob("*.py"))
    ]


@pytest.mark.parametrize(("folder", "path"), _cases(), ids=lambda v: str(v).replace(str(REPO), ""))
def test_imports_point_one_way(folder: str, path: Path) -> None:
    package = _package_of(folder)
    allowed = ALLOWED[folder] | {package}
    for name in _imports(path, package):
        parts = name.split(".")
        top = parts[0]
        if top in ALLOWED:
            pytest.fail(f"{path.relative_to(REPO)} imports {name!r}: use the headwater.* namespace")
        if top == "headwater" and len(parts) > 1 and parts[1] not in {"__version__"}:
            assert parts[1] in allowed, (
                f"{path.relative_to(REPO)} imports {name}: {folder} may import only {sorted(allowed)}"
            )
        assert top not in FORBIDDEN_THIRD_PARTY.get(folder, set()), (
            f"{path.relative_to(REPO)} imports {top}, which {folder} must not depend on"
        )


def test_every_package_folder_is_checked() -> None:
    assert _cases(), "no package folder found to check"
