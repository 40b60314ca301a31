"""Every consumer is a readers.Reader and every topic deletion goes through clients.delete_topics.

A consumer built around the factory would not be paused before its topic is deleted, and a deletion
around ``delete_topics`` would not pause anyone: on the embedded broker either kills the process
(``headwater.kafka.readers``). Checked on the source of every package, so a new one cannot slip in.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Every installed folder (pyproject's package-dir), so a folder added later is checked too.
PACKAGES = tuple(
    tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-dir"
    ].values()
)
#: The one module that may construct confluent-kafka's Consumer (Reader subclasses it).
CONSUMER_MAKER = Path("kafka/readers.py")
#: The one module that may call an AdminClient's delete_topics.
TOPIC_DELETER = Path("kafka/clients.py")


def _sources() -> list[tuple[Path, ast.AST]]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found.append((path.relative_to(REPO), ast.parse(path.read_text(encoding="utf-8"))))
    return found


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def test_only_the_readers_module_constructs_consumers() -> None:
    offenders = [
        f"{path}:{call.lineno}"
        for path, tree in _sources()
        if path != CONSUMER_MAKER
        for call in _calls(tree)
        if _name(call) in ("Consumer", "DeserializingConsumer")
    ]
    assert not offenders, f"build consumers with headwater.kafka.clients.consumer: {offenders}"


def test_only_clients_deletes_topics() -> None:
    offenders = [
        f"{path}:{call.lineno}"
        for path, tree in _sources()
        if path != TOPIC_DELETER
        for call in _calls(tree)
        if _name(call) == "delete_topics"
        and not (
            isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "clients"
        )
    ]
    assert not offenders, f"delete topics with headwater.kafka.clients.delete_topics: {offenders}"


def test_the_checks_see_the_packages() -> None:
    paths = {path for path, _tree in _sources()}
    assert CONSUMER_MAKER in paths and TOPIC_DELETER in paths
    assert {"kafka", "dbapi", "shell", "gateway", "headwater"} <= set(PACKAGES)
    assert len(paths) > 100
