"""Catalog objects to and from JSON-able dicts: for command payloads, snapshots and the digest.

No I/O. The dict forms are part of the command-log format (FORMAT_VERSION in records.py): change
them only together with a new format version and a reader for the old one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from headwater.metastore.catalog import (
    Catalog,
    Column,
    CustomType,
    PropertyValue,
    Query,
    QueryState,
    Source,
    SourceKind,
)


def column_to_dict(column: Column) -> dict[str, Any]:
    """A column as a dict (defaults left out, so old records stay short)."""
    body: dict[str, Any] = {"name": column.name, "type": column.type}
    if column.key:
        body["key"] = True
    if column.headers:
        body["headers"] = True
    if column.header_key is not None:
        body["headerKey"] = column.header_key
    return body


def column_from_dict(body: Mapping[str, Any]) -> Column:
    """The inverse of :func:`column_to_dict`."""
    return Column(
        name=body["name"],
        type=body["type"],
        key=bool(body.get("key", False)),
        headers=bool(body.get("headers", False)),
        header_key=body.get("headerKey"),
    )


def source_to_dict(source: Source) -> dict[str, Any]:
    """A source as a dict."""
    return {
        "kind": source.kind.value,
        "name": source.name,
        "columns": [column_to_dict(c) for c in source.columns],
        "topic": source.topic,
        "partitions": source.partitions,
        "keyFormat": source.key_format,
        "valueFormat": source.value_format,
        "properties": [[k, v] for k, v in source.properties],
        "statementText": source.statement_text,
        "readOnly": source.read_only,
        "timestampColumn": source.timestamp_column,
        "windowed": source.windowed,
        "queryId": source.query_id,
        "createdOffset": source.created_offset,
    }


def source_from_dict(body: Mapping[str, Any]) -> Source:
    """The inverse of :func:`source_to_dict`."""
    properties: tuple[tuple[str, PropertyValue], ...] = tuple(
        (str(k), v) for k, v in body.get("properties", ())
    )
    return Source(
        kind=SourceKind(body["kind"]),
        name=body["name"],
        columns=tuple(column_from_dict(c) for c in body["columns"]),
        topic=body["topic"],
        partitions=int(body["partitions"]),
        key_format=body.get("keyFormat", "KAFKA"),
        value_format=body.get("valueFormat", "JSON"),
        properties=properties,
        statement_text=body.get("statementText", ""),
        read_only=bool(body.get("readOnly", False)),
        timestamp_column=body.get("timestampColumn"),
        windowed=body.get("windowed"),
        query_id=body.get("queryId"),
        created_offset=int(body.get("createdOffset", -1)),
    )


def query_to_dict(query: Query) -> dict[str, Any]:
    """A persistent query as a dict."""
    body: dict[str, Any] = {
        "id": query.id,
        "statementText": query.statement_text,
        "sink": query.sink,
        "sources": list(query.sources),
        "state": query.state.value,
    }
    if query.start_offsets:  # only then: the digest of a catalog without them is unchanged
        body["startOffsets"] = start_offsets_to_dict(query.start_offsets)
    return body


def start_offsets_to_dict(offsets: Iterable[tuple[str, int, int]]) -> dict[str, dict[str, int]]:
    """(topic, partition, offset) triples as ``{topic: {"<partition>": offset}}``."""
    found: dict[str, dict[str, int]] = {}
    for topic, partition, offset in sorted(offsets):
        found.setdefault(topic, {})[str(partition)] = offset
    return found


def start_offsets_from_dict(
    body: Mapping[str, Mapping[str, int]],
) -> tuple[tuple[str, int, int], ...]:
    """The inverse of :func:`start_offsets_to_dict`."""
    return tuple(
        sorted(
            (str(topic), int(partition), int(offset))
            for topic, offsets in body.items()
            for partition, offset in offsets.items()
        )
    )


def query_from_dict(body: Mapping[str, Any]) -> Query:
    """The inverse of :func:`query_to_dict`."""
    return Query(
        id=body["id"],
        statement_text=body.get("statementText", ""),
        sink=body.get("sink"),
        sources=tuple(body.get("sources", ())),
        state=QueryState(body.get("state", "RUNNING")),
        start_offsets=start_offsets_from_dict(body.get("startOffsets") or {}),
    )


def catalog_to_dict(catalog: Catalog) -> dict[str, Any]:
    """A whole catalog as a dict, every collection sorted by name."""
    return {
        "sources": [source_to_dict(catalog.sources[n]) for n in sorted(catalog.sources)],
        "types": [
            {"name": t.name, "type": t.type}
            for t in (catalog.types[n] for n in sorted(catalog.types))
        ],
        "queries": [query_to_dict(catalog.queries[i]) for i in sorted(catalog.queries)],
        "lastOffset": catalog.last_offset,
    }


def catalog_from_dict(body: Mapping[str, Any]) -> Catalog:
    """The inverse of :func:`catalog_to_dict`."""
    sources = {s.name: s for s in map(source_from_dict, body.get("sources", ()))}
    types = {t["name"]: CustomType(t["name"], t["type"]) for t in body.get("types", ())}
    queries = {q.id: q for q in map(query_from_dict, body.get("queries", ()))}
    return Catalog(
        sources=MappingProxyType(sources),
        types=MappingProxyType(types),
        queries=MappingProxyType(queries),
        last_offset=int(body.get("lastOffset", -1)),
    )


def catalog_digest(catalog: Catalog) -> str:
    """A hash of the catalog's content: equal on every server that applied the same log."""
    canonical = json.dumps(catalog_to_dict(catalog), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
