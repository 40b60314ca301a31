"""The catalog as immutable snapshots: streams, tables, queries and custom types.

No I/O. A :class:`Catalog` is a frozen value; changing it returns a new one (copy on write of the
one mapping that changes), so validation always runs against a snapshot, never live state, and a
snapshot can be handed to another thread without locks. Names are stored as ksqlDB resolves them:
unquoted identifiers upper-cased by the parser, quoted ones as written. Column types are canonical
ksqlDB type text (``BIGINT``, ``DECIMAL(4, 2)``, ``ARRAY<STRING>``, ``STRUCT<`A` INT>``), as in
ksqlDB's own REST schemas.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

PropertyValue = str | int | float | bool


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


class SourceKind(enum.Enum):
    """A stream (append-only) or a table (latest value per key)."""

    STREAM = "STREAM"
    TABLE = "TABLE"


class QueryState(enum.Enum):
    """The lifecycle of a persistent query."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a source.

    Attributes:
        name: the column's name as resolved (case kept for quoted names).
        type: canonical ksqlDB type text.
        key: part of the Kafka record key (``KEY`` on streams, ``PRIMARY KEY`` on tables).
        headers: ``HEADERS``: the record's headers as ``ARRAY<STRUCT<KEY STRING, VALUE BYTES>>``.
        header_key: ``HEADER('k')``: the value of one header, as BYTES.
    """

    name: str
    type: str
    key: bool = False
    headers: bool = False
    header_key: str | None = None

    @property
    def in_value(self) -> bool:
        """Whether the column lives in the record's value."""
        return not (self.key or self.headers or self.header_key is not None)


@dataclass(frozen=True, slots=True)
class Source:
    """A stream or table over a Kafka topic.

    Attributes:
        kind: STREAM or TABLE.
        name: the source's name.
        columns: key columns first, in declaration order, then value and header columns.
        topic: the Kafka topic.
        partitions: the topic's partition count.
        key_format: KAFKA, JSON, DELIMITED, ... (the ``KEY_FORMAT``/``FORMAT`` property).
        value_format: JSON, DELIMITED, KAFKA, ... (the ``VALUE_FORMAT``/``FORMAT`` property).
        properties: every ``WITH`` property, names upper-cased, sorted by name.
        statement_text: the statement that created it.
        read_only: created with ``CREATE SOURCE``: no INSERT, no DROP of its topic.
        timestamp_column: the ``TIMESTAMP`` property, or None for the record's own timestamp.
        windowed: the window kind of a windowed source (TUMBLING, HOPPING, SESSION), or None.
        query_id: the persistent query that writes it (CREATE ... AS SELECT), or None.
        created_offset: the command-log offset of the command that created it.
    """

    kind: SourceKind
    name: str
    columns: tuple[Column, ...]
    topic: str
    partitions: int
    key_format: str = "KAFKA"
    value_format: str = "JSON"
    properties: tuple[tuple[str, PropertyValue], ...] = ()
    statement_text: str = ""
    read_only: bool = False
    timestamp_column: str | None = None
    windowed: str | None = None
    query_id: str | None = None
    created_offset: int = -1

    @property
    def key_columns(self) -> tuple[Column, ...]:
        """The key columns, in order."""
        return tuple(c for c in self.columns if c.key)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns stored in the record's value, in order."""
        return tuple(c for c in self.columns if c.in_value)

    def column(self, name: str) -> Column | None:
        """The column of that name, or None."""
        return next((c for c in self.columns if c.name == name), None)

    def property(self, name: str, default: PropertyValue | None = None) -> PropertyValue | None:
        """A ``WITH`` property by name, case-insensitively."""
        wanted = name.upper()
        return next((v for k, v in self.properties if k.upper() == wanted), default)


@dataclass(frozen=True, slots=True)
class CustomType:
    """A type alias made by ``CREATE TYPE name AS type``."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class Query:
    """A persistent query (CREATE ... AS SELECT, INSERT INTO ... SELECT)."""

    id: str
    statement_text: str
    sink: str | None
    sources: tuple[str, ...]
    state: QueryState = QueryState.RUNNING
    #: (topic, partition, offset) where it starts reading a source topic before it has a
    #: checkpoint (auto.offset.reset=latest: the ends when it was created); a topic not listed is
    #: read from its beginning.
    start_offsets: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Catalog:
    """One immutable snapshot of the catalog.

    Attributes:
        sources: streams and tables by name.
        types: custom types by name.
        queries: persistent queries by id.
        last_offset: the command-log offset of the last command applied (-1: none).
    """

    sources: Mapping[str, Source] = field(default_factory=_empty)
    types: Mapping[str, CustomType] = field(default_factory=_empty)
    queries: Mapping[str, Query] = field(default_factory=_empty)
    last_offset: int = -1

    def source(self, name: str) -> Source | None:
        """The stream or table of that name, or None."""
        return self.sources.get(name)

    def alternatives(self, name: str, kind: SourceKind | None = None) -> str:
        """ksqlDB's hint for a source name that is not found (``checkAlternatives``): the sources
        whose names differ only in case (of that kind, when given), as ``\nDid you mean ...``;
        empty when there are none."""
        matched = sorted(
            (s for s in self.sources.values() if s.name.upper() == name.upper()),
            key=lambda s: s.name,
        )
        matched = [s for s in matched if kind is None or s.kind is kind]
        if not matched:
            return ""
        if len(matched) > 1:
            named = [f'"{s.name}" ({s.kind.value.upper()})' for s in matched]
            listed = (
                " or ".join(named)
                if len(named) == 2
                else ", ".join(named[:-1]) + ", or " + named[-1]
            )
            return (
                f"\nDid you mean {listed}? "
                "Hint: wrap the source name in double quotes to make it case-sensitive."
            )
        found = matched[0].name
        if any(c.islower() for c in found):
            return (
                f'\nDid you mean "{found}"? Hint: wrap the source name in double quotes to make '
                "it case-sensitive."
            )
        return f"\nDid you mean {found}? Hint: try removing double quotes from the source name."

    def with_source(self, source: Source, offset: int) -> Catalog:
        """A new catalog with ``source`` added or replaced."""
        return replace(self, sources=_put(self.sources, source.name, source), last_offset=offset)

    def without_source(self, name: str, offset: int) -> Catalog:
        """A new catalog without the source ``name``."""
        return replace(self, sources=_drop(self.sources, name), last_offset=offset)

    def with_type(self, custom: CustomType, offset: int) -> Catalog:
        """A new catalog with the custom type added."""
        return replace(self, types=_put(self.types, custom.name, custom), last_offset=offset)

    def without_type(self, name: str, offset: int) -> Catalog:
        """A new catalog without the custom type ``name``."""
        return replace(self, types=_drop(self.types, name), last_offset=offset)

    def with_query(self, query: Query, offset: int) -> Catalog:
        """A new catalog with the query added or replaced."""
        return replace(self, queries=_put(self.queries, query.id, query), last_offset=offset)

    def without_query(self, query_id: str, offset: int) -> Catalog:
        """A new catalog without the query."""
        return replace(self, queries=_drop(self.queries, query_id), last_offset=offset)

    def readers_of(self, name: str) -> tuple[Query, ...]:
        """The persistent queries that read the source ``name``."""
        return tuple(q for q in self.queries.values() if name in q.sources)

    def writers_of(self, name: str) -> tuple[Query, ...]:
        """The persistent queries that write into the source ``name``."""
        return tuple(q for q in self.queries.values() if q.sink == name)

    def drop_refusal(self, name: str) -> str | None:
        """Why the source ``name`` cannot be dropped, in ksqlDB 0.29's words, or None.

        As ksqlDB: INSERT INTO queries that read from it or write into it must be terminated
        first; streams and tables whose CREATE ... AS SELECT query reads from it must be dropped
        first; the CREATE ... AS SELECT query that writes it does not refuse (dropping the source
        terminates it).
        """
        created_by = {s.query_id for s in self.sources.values() if s.query_id is not None}
        inserts = [q for q in self.queries.values() if q.id not in created_by]
        readers = sorted(q.id for q in inserts if name in q.sources)
        writers = sorted(q.id for q in inserts if q.sink == name)
        if readers or writers:
            return (
                f"Cannot drop {name}.\nThe following queries read from this source: "
                f"[{', '.join(readers)}].\nThe following queries write into this source: "
                f"[{', '.join(writers)}].\nYou need to terminate them before dropping {name}."
            )
        derived = sorted(
            s.name
            for s in self.sources.values()
            if s.name != name
            and s.query_id is not None
            and name in getattr(self.queries.get(s.query_id), "sources", ())
        )
        if derived:
            return (
                f"Cannot drop {name}.\nThe following streams and/or tables read from this "
                f"source: [{', '.join(derived)}].\nYou need to drop them before dropping {name}."
            )
        return None


def _put(mapping: Mapping[str, Any], key: str, value: Any) -> Mapping[str, Any]:
    copy = dict(mapping)
    copy[key] = value
    return MappingProxyType(copy)


def _drop(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    copy = dict(mapping)
    copy.pop(key, None)
    return MappingProxyType(copy)
