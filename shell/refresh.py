"""Rebuilds the completer's catalog names in a background thread, through the DB-API driver
(SHOW STREAMS; SHOW TABLES; SHOW QUERIES; SHOW TYPES; SHOW TOPICS; SHOW FUNCTIONS, then DESCRIBE
of each source; the functions include the server's Python ones).
Does I/O (the network, on its own thread); `metadata_from` turns the answers into `Metadata`
without any.

One refresh runs at a time; asking again while one runs schedules exactly one more, so a burst
of DDL costs at most two rounds. Failures are logged and leave the old names in place: completion
must never break the prompt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from headwater import dbapi

from .completer import Metadata

__all__ = ["Refresher", "metadata_from"]

log = logging.getLogger(__name__)

_LISTS = (
    "SHOW STREAMS;",
    "SHOW TABLES;",
    "SHOW QUERIES;",
    "SHOW TYPES;",
    "SHOW TOPICS;",
    "SHOW FUNCTIONS;",
)


def _names(entity: Mapping[str, Any], key: str) -> tuple[str, ...]:
    items = entity.get(key)
    if not isinstance(items, list):
        return ()
    return tuple(sorted(str(i["name"]) for i in items if isinstance(i, Mapping) and "name" in i))


def metadata_from(
    entities: Iterable[Mapping[str, Any]],
    descriptions: Iterable[Mapping[str, Any]] = (),
    *,
    properties: Iterable[str] = (),
    variables: Iterable[str] = (),
) -> Metadata:
    """The completer's names from `/ksql` entities (SHOW ... answers and DESCRIBE answers).

    Args:
        entities: `streams`, `tables`, `queries`, `type_list`, `kafka_topics`,
            `function_names` entities.
        descriptions: `sourceDescription` entities.
        properties: the session's property names.
        variables: the session's variable names.
    """
    found: dict[str, tuple[str, ...]] = {}
    for entity in entities:
        kind = entity.get("@type")
        if kind == "streams":
            found["streams"] = _names(entity, "streams")
        elif kind == "tables":
            found["tables"] = _names(entity, "tables")
        elif kind == "queries":
            queries = entity.get("queries")
            found["queries"] = (
                tuple(sorted(str(q["id"]) for q in queries if isinstance(q, Mapping) and "id" in q))
                if isinstance(queries, list)
                else ()
            )
        elif kind == "type_list":
            types = entity.get("types")
            found["types"] = tuple(sorted(types)) if isinstance(types, Mapping) else ()
        elif kind == "kafka_topics":
            found["topics"] = _names(entity, "topics")
        elif kind == "function_names":
            found["functions"] = _names(entity, "functions")
    columns: dict[str, tuple[str, ...]] = {}
    for entity in descriptions:
        description = entity.get("sourceDescription")
        if isinstance(description, Mapping) and description.get("name"):
            columns[str(description["name"])] = tuple(
                str(f.get("name"))
                for f in description.get("fields") or []
                if isinstance(f, Mapping)
            )
    return Metadata(
        streams=found.get("streams", ()),
        tables=found.get("tables", ()),
        columns=MappingProxyType(columns),
        topics=found.get("topics", ()),
        queries=found.get("queries", ()),
        types=found.get("types", ()),
        functions=found.get("functions", ()),
        properties=tuple(sorted(properties)),
        variables=tuple(sorted(variables)),
    )


def fetch_metadata(connection: dbapi.Connection) -> Metadata:
    """Ask the server for every name the completer offers (each SHOW on its own, so one that
    this server does not support costs only its own names)."""
    entities: list[Mapping[str, Any]] = []
    cursor = connection.cursor()
    try:
        for statement in _LISTS:
            try:
                entities.extend(cursor.execute(statement).entities)
            except dbapi.DatabaseError as exc:
                log.debug("completion refresh: %s failed: %s", statement, exc)
        sources = [
            n
            for e in entities
            if e.get("@type") in ("streams", "tables")
            for n in _names(e, str(e["@type"]))
        ]
        descriptions: list[Mapping[str, Any]] = []
        for name in sources:
            quoted = "`" + name.replace("`", "``") + "`"
            try:
                descriptions.extend(cursor.execute(f"DESCRIBE {quoted};").entities)
            except dbapi.DatabaseError as exc:
                log.debug("completion refresh: DESCRIBE %s failed: %s", name, exc)
    finally:
        cursor.close()
    return metadata_from(
        entities,
        descriptions,
        properties=connection.properties.keys(),
        variables=connection.session_variables.keys(),
    )


class Refresher:
    """Runs `fetch` on a daemon thread and hands each new `Metadata` to `publish`."""

    def __init__(self, fetch: Callable[[], Metadata], publish: Callable[[Metadata], None]) -> None:
        self._fetch = fetch
        self._publish = publish
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self._running = False

    def refresh(self) -> None:
        """Start a refresh, or schedule one more if one is running."""
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
            self._thread = threading.Thread(
                target=self._loop, name="headwater-refresh", daemon=True
            )
            self._thread.start()

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the running refresh (tests, and a clean exit)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            try:
                self._publish(self._fetch())
            except dbapi.Error as exc:
                log.debug("completion refresh failed: %s", exc)
            with self._lock:
                if not self._again:
                    self._running = False
                    return
                self._again = False
