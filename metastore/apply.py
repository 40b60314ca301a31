"""Applying one command to a catalog snapshot: a pure function (catalog, command) -> catalog.

No I/O. The planner (plan.py) has already checked the statement against the snapshot the command
was validated on; the compare-and-append rule (replay.py) guarantees that snapshot is the one it is
applied to. The checks here are the catalog's own invariants, so that even a record written by a
faulty submitter can only be rejected, identically on every server, never corrupt the catalog.
Each command kind is one entry in :data:`APPLIERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from headwater.metastore.catalog import Catalog, CustomType, SourceKind
from headwater.metastore.codec import query_from_dict, source_from_dict
from headwater.metastore.errors import (
    SourceExists,
    SourceInUse,
    TypeExists,
    UnknownSource,
    UnknownType,
    UnreadableRecord,
)
from headwater.metastore.records import CommandRecord

Applier = Callable[[Catalog, Mapping[str, Any], int], tuple[Catalog, str]]


def _create_source(
    catalog: Catalog, command: Mapping[str, Any], offset: int
) -> tuple[Catalog, str]:
    source = source_from_dict(command["source"])
    existing = catalog.source(source.name)
    if existing is not None:
        if not command.get("replace", False):
            raise SourceExists(f"{existing.kind.value.title()} {source.name} already exists")
        if existing.kind is not source.kind:
            raise SourceExists(
                f"Cannot replace {existing.kind.value} {source.name} with a {source.kind.value}"
            )
    if source.created_offset < 0:
        source = replace(source, created_offset=offset)
    noun = "Stream" if source.kind is SourceKind.STREAM else "Table"
    return catalog.with_source(
        source, offset
    ), f"{noun} {'altered' if command.get('altered') else 'created'}"


def _drop_source(catalog: Catalog, command: Mapping[str, Any], offset: int) -> tuple[Catalog, str]:
    name = command["name"]
    source = catalog.source(name)
    if source is None:
        raise UnknownSource(f"Source {name} does not exist.")
    refusal = catalog.drop_refusal(name)
    if refusal is not None:
        raise SourceInUse(refusal)
    if source.query_id is not None and source.query_id in catalog.queries:
        catalog = catalog.without_query(source.query_id, offset)  # as ksqlDB: the drop ends it
    return catalog.without_source(
        name, offset
    ), f"Source `{name}` (topic: {source.topic}) was dropped."


def _create_type(catalog: Catalog, command: Mapping[str, Any], offset: int) -> tuple[Catalog, str]:
    name, type_text = command["name"], command["sqlType"]
    if name in catalog.types:
        raise TypeExists(f"Cannot register custom type '{name}' since it is already registered")
    return catalog.with_type(CustomType(name, type_text), offset), f"Registered custom type {name}"


def _drop_type(catalog: Catalog, command: Mapping[str, Any], offset: int) -> tuple[Catalog, str]:
    name = command["name"]
    if name not in catalog.types:
        raise UnknownType(f"Type {name} does not exist.")
    return catalog.without_type(name, offset), f"Dropped type '{name}'"


def query_id_for(kind: str, sink: str | None, offset: int) -> str:
    """ksqlDB's id of a persistent query: ``CSAS_<SINK>_<n>`` or ``INSERTQUERY_<n>``.

    ``n`` is the command's offset in the command log, so every server gives the same id.
    """
    return f"{kind}_{sink}_{offset}" if kind in ("CSAS", "CTAS") else f"{kind}_{offset}"


def _start_query(catalog: Catalog, command: Mapping[str, Any], offset: int) -> tuple[Catalog, str]:
    body = dict(command["query"])
    kind = body.pop("kind", "INSERTQUERY")
    body.setdefault("id", query_id_for(kind, body.get("sink"), offset))
    query = query_from_dict(body)
    for name in query.sources:
        if catalog.source(name) is None:
            raise UnknownSource(f"{name} does not exist.")
    if "sink" in command:
        sink = dict(command["sink"])
        sink["source"] = {**sink["source"], "queryId": query.id}
        catalog, message = _create_source(catalog, sink, offset)
    else:
        if query.sink is None or catalog.source(query.sink) is None:
            raise UnknownSource(f"{query.sink} does not exist.")
        message = "Created query"
    return catalog.with_query(query, offset), f"{message} with query ID: {query.id}"


def _terminate_query(
    catalog: Catalog, command: Mapping[str, Any], offset: int
) -> tuple[Catalog, str]:
    ids = list(command.get("queryIds") or [command["queryId"]])
    for query_id in ids:
        query = catalog.queries.get(query_id)
        if query is None:
            raise UnknownSource(f"Unknown queryId: {query_id}")
        catalog = catalog.without_query(query_id, offset)
        sink = catalog.source(query.sink) if query.sink else None
        if sink is not None and sink.query_id == query_id:
            catalog = catalog.with_source(replace(sink, query_id=None), offset)
    if len(ids) == 1:
        return catalog, f"Query terminated: {ids[0]}"
    return catalog, f"Queries terminated: {', '.join(ids)}"


#: Command kind -> how it changes the catalog.
APPLIERS: Mapping[str, Applier] = {
    "create_source": _create_source,
    "drop_source": _drop_source,
    "create_type": _create_type,
    "drop_type": _drop_type,
    "start_query": _start_query,
    "terminate_query": _terminate_query,
}


def apply_command(catalog: Catalog, record: CommandRecord, offset: int) -> tuple[Catalog, str]:
    """Apply ``record`` (read at ``offset``) to ``catalog``.

    Returns:
        The new catalog and ksqlDB's success message for the command.

    Raises:
        MetastoreError: the command breaks a catalog invariant (it is rejected, catalog unchanged).
        UnreadableRecord: the command kind is unknown to this server (it must stop, not skip).
    """
    applier = APPLIERS.get(record.kind)
    if applier is None:
        raise UnreadableRecord(f"unknown command type {record.kind!r} at offset {offset}")
    try:
        return applier(catalog, record.command, offset)
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableRecord(
            f"malformed {record.kind} command at offset {offset}: {exc!r}"
        ) from exc
