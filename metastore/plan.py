"""Validation and planning of catalog statements against one snapshot: statement -> command.

No I/O. Everything outside the catalog that a statement depends on (does the topic exist, with how
many partitions) is gathered by the caller first and passed in as :class:`TopicFacts`, so the same
statement, snapshot and facts always give the same plan. The checks and their messages follow
ksqlDB's. A :class:`Plan` is the command to append to the log plus the Kafka changes the submitter
makes around it (create the topic before committing; delete it after the drop is applied).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from headwater.metastore.catalog import Catalog, Column, PropertyValue, Source, SourceKind
from headwater.metastore.codec import source_from_dict, source_to_dict
from headwater.metastore.delimiters import DelimiterError, delimiter
from headwater.metastore.errors import (
    SourceExists,
    SourceInUse,
    TooManyPersistentQueries,
    TopicError,
    TypeExists,
    UnknownSource,
    UnknownType,
    ValidationError,
)
from headwater.metastore.format_defaults import KSQLDB_DEFAULTS, FormatDefaults
from headwater.sqlparse_ext import ParseError, parse_type, sqltypes
from headwater.sqlparse_ext import statements as ast

#: WITH properties a CREATE STREAM/TABLE accepts (ksqlDB's, plus headwater's dotted ones).
SOURCE_PROPERTIES = frozenset(
    {
        "KAFKA_TOPIC",
        "KEY_FORMAT",
        "VALUE_FORMAT",
        "FORMAT",
        "PARTITIONS",
        "REPLICAS",
        "TIMESTAMP",
        "TIMESTAMP_FORMAT",
        "VALUE_DELIMITER",
        "KEY_DELIMITER",
        "WRAP_SINGLE_VALUE",
        "WINDOW_TYPE",
        "WINDOW_SIZE",
        "RETENTION_MS",
        "KEY_SCHEMA_ID",
        "VALUE_SCHEMA_ID",
        "KEY_SCHEMA_FULL_NAME",
        "VALUE_SCHEMA_FULL_NAME",
        "VALUE_AVRO_SCHEMA_FULL_NAME",
        "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
        "VALUE_PROTOBUF_NULLABLE_REPRESENTATION",
        "ACCEPTABLE.OFFSET.LAG",
        "MAX.STALENESS.MS",
    }
)

#: WITH properties a CREATE STREAM ... AS SELECT accepts.
SINK_PROPERTIES = frozenset(
    {
        "KAFKA_TOPIC",
        "KEY_FORMAT",
        "VALUE_FORMAT",
        "FORMAT",
        "PARTITIONS",
        "REPLICAS",
        "KEY_SCHEMA_ID",
        "VALUE_SCHEMA_ID",
        "KEY_SCHEMA_FULL_NAME",
        "VALUE_SCHEMA_FULL_NAME",
        "VALUE_AVRO_SCHEMA_FULL_NAME",
        "TIMESTAMP",
        "TIMESTAMP_FORMAT",
        "VALUE_DELIMITER",
        "KEY_DELIMITER",
        "WRAP_SINGLE_VALUE",
        "RETENTION_MS",
        "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
        "VALUE_PROTOBUF_NULLABLE_REPRESENTATION",
    }
)

#: What a CREATE TABLE ... AS SELECT may set besides a sink's properties: how stale a read of
#: the table may be (as a declared table's WITH clause may).
TABLE_SINK_PROPERTIES = frozenset({"ACCEPTABLE.OFFSET.LAG", "MAX.STALENESS.MS"})

#: Serialization formats headwater reads and writes today.
SUPPORTED_FORMATS = frozenset(
    {"JSON", "DELIMITED", "KAFKA", "NONE", "AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR"}
)
#: Of those, the formats whose schemas live in a schema registry.
SCHEMA_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})
#: Of those, the formats whose columns headwater infers from the registry.
INFERRED_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})
#: Formats ksqlDB knows that headwater does not read yet.
LATER_FORMATS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TopicFacts:
    """What the submitter found out about the Kafka topics a statement names.

    Attributes:
        partitions: topic name -> partition count, for every named topic that exists.
    """

    partitions: Mapping[str, int] = field(default_factory=dict)
    #: subject (``<topic>-key``, ``<topic>-value``) or ``id:N`` -> the columns its schema gives,
    #: as (name, type text), or why it gives none, for a CREATE STREAM/TABLE whose columns are
    #: to be inferred (engine.formats.schema_inference gathers them); None: there is no schema registry.
    schemas: Mapping[str, tuple[tuple[str, str], ...] | str] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a statement does.

    Attributes:
        command: the payload of the command record, or None when nothing changes
            (``IF NOT EXISTS`` on an existing name, ``IF EXISTS`` on a missing one).
        message: what to tell the user when nothing changes.
        create_topic: (name, partitions) to create before the command is committed.
        delete_topic: topic to delete once the command is applied (DROP ... DELETE TOPIC).
    """

    command: Mapping[str, Any] | None
    message: str = ""
    create_topic: tuple[str, int] | None = None
    delete_topic: str | None = None


@dataclass(frozen=True, slots=True)
class QueryShape:
    """What the engine found a persistent query's SELECT to read and write.

    Attributes:
        sources: the streams and tables it reads.
        columns: its output columns, key columns first.
        kind: what it produces: a STREAM, or a TABLE (an aggregation, a query over a table).
        windowed: a windowed aggregation's window kind (TUMBLING, HOPPING, SESSION), or None.
        window_size_ms: a time window's size (None for sessions and unwindowed results).
    """

    sources: tuple[str, ...]
    columns: tuple[Column, ...]
    kind: SourceKind = SourceKind.STREAM
    windowed: str | None = None
    window_size_ms: int | None = None


class QueryAnalyzer(Protocol):
    """What the engine tells the planner about persistent queries. The engine owns what a SELECT
    means and which sinks it can write; the metastore stays below it and is handed one of these."""

    def shape(self, query: ast.Query, catalog: Catalog, sink_name: str) -> QueryShape:
        """The SELECT's sources and output columns.

        Raises:
            ValidationError: the engine refuses the query (the message says why).
        """
        ...

    def check_sink(self, sink: Source, catalog: Catalog) -> None:
        """Raises ValidationError when records of ``sink``'s columns cannot be written or read in
        its formats (a STRUCT in DELIMITED, say); checked for every new stream and table."""
        ...


def topics_named(statement: ast.Statement) -> tuple[str, ...]:
    """The Kafka topics the caller must look up before planning ``statement``."""
    if isinstance(statement, ast.CreateSource):
        topic = statement.properties.get("KAFKA_TOPIC")
        return (str(topic),) if topic is not None else ()
    if isinstance(statement, ast.CreateAsSelect):
        return (str(statement.properties.get("KAFKA_TOPIC") or statement.name),)
    return ()


#: ``ksql.query.persistent.active.limit``: the setting's name, as the refusal names it.
ACTIVE_LIMIT_SETTING = "ksql.query.persistent.active.limit"
#: ksqlDB's default for it (Integer.MAX_VALUE): no bound.
NO_ACTIVE_LIMIT = 2**31 - 1


def plan(
    statement: ast.Statement,
    catalog: Catalog,
    facts: TopicFacts,
    analyze: QueryAnalyzer | None = None,
    active_limit: int = NO_ACTIVE_LIMIT,
    defaults: FormatDefaults = KSQLDB_DEFAULTS,
) -> Plan:
    """Validate ``statement`` against ``catalog`` and plan its command.

    Args:
        statement: the parsed statement.
        catalog: the snapshot it is validated against.
        facts: what the caller found out about the topics it names.
        analyze: the engine's analysis of persistent queries (needed for CSAS/INSERT ... SELECT).
        active_limit: ``ksql.query.persistent.active.limit``: the most persistent queries the
            catalog may hold once the statement is applied.
        defaults: the formats of a CREATE STREAM/TABLE whose WITH clause names none.

    Raises:
        TooManyPersistentQueries: a valid persistent query that would pass ``active_limit``.
        ValidationError: the statement is not valid here; the message says why.
    """
    match statement:
        case ast.CreateAsSelect():
            planned = _plan_create_as_select(statement, catalog, facts, _engine(analyze), defaults)
            return _within_capacity(planned, catalog, active_limit)
        case ast.InsertInto():
            planned = _plan_insert_select(statement, catalog, _engine(analyze))
            return _within_capacity(planned, catalog, active_limit)
        case ast.CreateSource():
            planned = _plan_create_source(statement, catalog, facts, defaults)
        case ast.AlterSource():
            planned = _plan_alter_source(statement, catalog)
        case ast.Drop():
            planned = _plan_drop(statement, catalog)
        case ast.CreateType():
            planned = _plan_create_type(statement, catalog)
        case ast.DropType():
            planned = _plan_drop_type(statement, catalog)
        case ast.Terminate():
            planned = _plan_terminate(statement, catalog)
        case _:
            name = type(statement).__name__
            raise ValidationError(f"{name} statements do not change the catalog")
    if analyze is not None and planned.command and planned.command["type"] == "create_source":
        # The engine's serde decides which columns each format can carry (one definition).
        analyze.check_sink(source_from_dict(planned.command["source"]), catalog)
    return planned


def _engine(analyze: QueryAnalyzer | None) -> QueryAnalyzer:
    if analyze is None:
        raise ValidationError("persistent queries need the engine, which this server lacks")
    return analyze


def _within_capacity(planned: Plan, catalog: Catalog, active_limit: int) -> Plan:
    if planned.command is not None and planned.command["type"] == "start_query":
        check_capacity(len(catalog.queries) + 1, active_limit)
    return planned


def check_capacity(count: int, active_limit: int) -> None:
    """ksqlDB's check (``QueryCapacityUtil``): the persistent queries there would be with the
    statement applied (``count``, the new one included, as ksqlDB counts them in its sandbox)
    must not exceed ``active_limit``. Checked after the statement's own validation, so an invalid
    statement is told what is wrong with it first.

    Raises:
        TooManyPersistentQueries: with ksqlDB's message.
    """
    if count > active_limit:
        raise TooManyPersistentQueries(
            "Not executing statement(s) as it would cause the number of active, persistent "
            "queries to exceed the configured limit. Use the TERMINATE command to terminate "
            f"existing queries, or increase the '{ACTIVE_LIMIT_SETTING}' setting via the "
            f"'ksql-server.properties' file. Current persistent query count: {count}. "
            f"Configured limit: {active_limit}."
        )


def _plan_create_source(
    create: ast.CreateSource, catalog: Catalog, facts: TopicFacts, defaults: FormatDefaults
) -> Plan:
    kind = SourceKind(create.kind)
    noun = kind.value.lower()
    existing = catalog.source(create.name)
    if create.or_replace and (create.source or (existing is not None and existing.read_only)):
        raise ValidationError(  # ksqlDB's CreateSourceFactory: whether or not it exists
            f"Cannot add {noun} '{create.name}': CREATE OR REPLACE is not "
            f"supported on source {noun}s."
        )
    if existing is not None:
        if create.if_not_exists:
            return Plan(None, f"Cannot add {noun} {create.name}: it already exists.")
        if not create.or_replace or existing.kind is not kind:
            raise SourceExists(
                f"Cannot add {noun} '{create.name}': A {existing.kind.value.lower()} "
                "with the same name already exists"
            )
        if existing.query_id is not None:
            raise SourceInUse(
                f"Cannot replace {create.name}: it is written by query {existing.query_id}"
            )
    properties = _check_properties(create.properties)
    topic = _required(properties, "KAFKA_TOPIC", create.kind)
    key_format, value_format = _formats(properties, create.kind, defaults)
    _check_format_configs(properties, (key_format, value_format))
    _check_registry(str(topic), (key_format, value_format), facts)
    create = _with_inferred_columns(
        create, str(topic), properties, (key_format, value_format), facts
    )
    columns = _columns(create, kind, catalog)
    _check_formats(columns, key_format, value_format)
    partitions, create_topic = _topic(str(topic), properties, facts)
    timestamp = _timestamp_column(properties, columns)
    windowed = _declared_window(properties, columns)
    source = Source(
        kind=kind,
        name=create.name,
        columns=columns,
        topic=str(topic),
        partitions=partitions,
        key_format=key_format,
        value_format=value_format,
        properties=tuple(sorted((k.upper(), v) for k, v in properties.items())),
        statement_text=create.text.strip(),
        read_only=create.source,
        timestamp_column=timestamp,
        windowed=windowed,
    )
    command = {
        "type": "create_source",
        "source": source_to_dict(source),
        "replace": existing is not None,
    }
    return Plan(command, create_topic=create_topic)


def _with_inferred_columns(
    create: ast.CreateSource,
    topic: str,
    properties: Mapping[str, PropertyValue],
    formats: tuple[str, str],
    facts: TopicFacts,
) -> ast.CreateSource:
    """``create`` with the key and value columns it leaves out taken from the schema registry,
    for formats with registered schemas (ksqlDB's schema inference)."""
    declared_keys = any(c.key or c.primary_key for c in create.columns)
    declared_values = any(
        not (c.key or c.primary_key or c.headers or c.header_key) for c in create.columns
    )
    added: dict[str, list[ast.Column]] = {"key": [], "value": []}
    for part, fmt, declared in (
        ("key", formats[0], declared_keys),
        ("value", formats[1], declared_values),
    ):
        schema_id = properties.get(f"{part.upper()}_SCHEMA_ID")
        if schema_id is not None:  # ksqlDB's DefaultSchemaInjector, in its order
            name = f"{part.upper()}_SCHEMA_ID"
            _check_schema_id_format(part, fmt)
            if declared:
                raise ValidationError(
                    f"Table elements and {name} cannot both exist for create statement."
                )
        if fmt in SCHEMA_FORMATS and fmt not in INFERRED_FORMATS and not declared:
            if part == "key":
                continue
            raise ValidationError(
                f"No columns supplied: headwater does not infer columns from "
                f"{fmt} schemas yet; declare them"
            )
        if fmt not in INFERRED_FORMATS or facts.schemas is None:
            if schema_id is not None:
                raise ValidationError(
                    f"{part.upper()}_SCHEMA_ID is only valid with a format "
                    "whose schemas are in the schema registry"
                )
            continue
        if declared and schema_id is None:
            continue
        subject = f"id:{schema_id}" if schema_id is not None else f"{topic}-{part}"
        found = facts.schemas.get(subject)
        if found is None:
            if part == "key":
                continue  # no key schema: a stream without key columns
            raise ValidationError(
                f"Schema for message {part}s on topic '{topic}' does not exist in the Schema "
                f"Registry.Subject: {topic}-{part}"
            )
        if isinstance(found, str):
            raise ValidationError(f"Unable to use the {part} schema of {subject}: {found}")
        if declared:
            raise ValidationError(
                f"Table or stream columns and {part.upper()}_SCHEMA_ID cannot both be given"
            )
        for name, type_text in found:
            try:
                sql_type = parse_type(type_text)
            except ParseError as exc:
                raise ValidationError(
                    f"Unable to use the {part} schema of {subject}: {exc}"
                ) from None
            added[part].append(
                ast.Column(
                    name,
                    sql_type,
                    key=part == "key" and create.kind == "STREAM",
                    primary_key=part == "key" and create.kind == "TABLE",
                )
            )
    if not added["key"] and not added["value"]:
        return create
    keys = [c for c in create.columns if c.key or c.primary_key] + added["key"]
    rest = [c for c in create.columns if not (c.key or c.primary_key)] + added["value"]
    return replace(create, columns=(*keys, *rest))


def _declared_window(
    properties: Mapping[str, PropertyValue], columns: tuple[Column, ...]
) -> str | None:
    """A declared source's window (``WINDOW_TYPE``, with ``WINDOW_SIZE`` for time windows): its
    record keys are windowed keys."""
    kind = properties.get("WINDOW_TYPE")
    if kind is None:
        if properties.get("WINDOW_SIZE") is not None:
            raise ValidationError("'WINDOW_SIZE' is only valid with 'WINDOW_TYPE'")
        return None
    window = str(kind).upper()
    if window not in ("TUMBLING", "HOPPING", "SESSION"):
        raise ValidationError(
            f"Invalid value for 'WINDOW_TYPE': {kind}. Valid values: [SESSION, HOPPING, TUMBLING]"
        )
    size = properties.get("WINDOW_SIZE")
    if window == "SESSION" and size is not None:
        raise ValidationError("'WINDOW_SIZE' should not be set for SESSION windows.")
    if window != "SESSION" and size is None:
        raise ValidationError(
            f"{window} windows require 'WINDOW_SIZE' to be provided in the "
            "WITH clause. For example: 'WINDOW_SIZE'='10 SECONDS'"
        )
    if window != "SESSION":
        parts = str(size).split()
        try:
            ast.Duration(int(parts[0]), parts[1].upper()).milliseconds  # noqa: B018 - a check
        except (ValueError, IndexError, KeyError):
            raise ValidationError(
                f"Invalid WINDOW_SIZE: {size!r} (for example '10 SECONDS')"
            ) from None
    if not any(c.key for c in columns):
        raise ValidationError("Windowed sources require a key column.")
    return window


def _check_registry(topic: str, formats: tuple[str, ...], facts: TopicFacts) -> None:
    """Formats with schemas in a registry need one (ksqlDB's message)."""
    for fmt in formats:
        if fmt in SCHEMA_FORMATS and facts.schemas is None:
            raise ValidationError(
                f"Cannot create topic '{topic}' with format {fmt} without "
                "configuring 'ksql.schema.registry.url'"
            )


def _check_properties(properties: ast.Properties) -> dict[str, PropertyValue]:
    unknown = sorted(name for name in properties if name.upper() not in SOURCE_PROPERTIES)
    if unknown:
        raise ValidationError(f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}")
    checked = {name.upper(): value for name, value in properties.items() if value is not None}
    _check_delimiters(checked)
    return checked


def _check_delimiters(properties: Mapping[str, PropertyValue]) -> None:
    """A delimiter property names one character (ksqlDB checks it while preparing)."""
    for prop in ("KEY_DELIMITER", "VALUE_DELIMITER"):
        if prop in properties:
            try:
                delimiter(properties[prop], prop)
            except DelimiterError as exc:
                raise ValidationError(f"Failed to prepare statement: {exc}") from None


#: The format configs each format takes (ksqlDB's ``Format.getSupportedProperties``), of those
#: headwater derives from the WITH clause (``format_configs``).
FORMAT_CONFIGS: Mapping[str, frozenset[str]] = {
    "AVRO": frozenset({"fullSchemaName"}),
    "JSON_SR": frozenset({"fullSchemaName"}),
    "PROTOBUF": frozenset({"fullSchemaName"}),
    "DELIMITED": frozenset({"delimiter"}),
}


def format_configs(properties: Mapping[str, PropertyValue], side: str) -> dict[str, str]:
    """One side's format configs as ksqlDB derives them from the WITH clause (its
    ``getKeyFormatProperties``/``getValueFormatProperties``), in its order: ``fullSchemaName``
    from ``<SIDE>_SCHEMA_FULL_NAME`` (the value's legacy ``VALUE_AVRO_SCHEMA_FULL_NAME`` first),
    then ``delimiter`` from ``<SIDE>_DELIMITER``."""
    found: dict[str, str] = {}
    names = [f"{side}_SCHEMA_FULL_NAME"]
    if side == "VALUE":
        names.insert(0, "VALUE_AVRO_SCHEMA_FULL_NAME")
    full_name = next((properties[n] for n in names if properties.get(n) is not None), None)
    if full_name is not None:
        found["fullSchemaName"] = str(full_name).strip()
    if properties.get(f"{side}_DELIMITER") is not None:
        found["delimiter"] = str(properties[f"{side}_DELIMITER"])
    return found


def _check_format_configs(
    properties: Mapping[str, PropertyValue], formats: tuple[str, str]
) -> None:
    """Each side's format configs are ones its format takes, none of them blank (ksqlDB's
    FormatProperties.validateProperties, in its words)."""
    for side, fmt in zip(("KEY", "VALUE"), formats, strict=True):
        configs = format_configs(properties, side)
        unsupported = [c for c in configs if c not in FORMAT_CONFIGS.get(fmt, frozenset())]
        if unsupported:
            raise ValidationError(
                f"{fmt} does not support the following configs: [{', '.join(unsupported)}]"
            )
        for name, value in configs.items():
            if name != "delimiter" and not value.strip():  # a delimiter has its own rule
                shown = ", ".join(f"{k}={v}" for k, v in configs.items())
                raise ValidationError(f"{name} cannot be empty. Format configuration: {{{shown}}}")


def _required(properties: Mapping[str, PropertyValue], name: str, kind: str) -> PropertyValue:
    value = properties.get(name)
    if value is None or value == "":
        raise ValidationError(f'Missing required property "{name}" for CREATE {kind}')
    return value


def _formats(
    properties: Mapping[str, PropertyValue], kind: str, defaults: FormatDefaults
) -> tuple[str, str]:
    both = properties.get("FORMAT")
    _one_format_property(properties)
    value = both if both is not None else properties.get("VALUE_FORMAT", defaults.value)
    if value is None:
        raise ValidationError(
            "Statement is missing the 'VALUE_FORMAT' property from the WITH clause. "
            "Either provide one or set a default via the 'ksql.persistence.default.format.value' "
            "config."
        )
    key = both if both is not None else properties.get("KEY_FORMAT", defaults.key)
    return _format_name(key, "KEY_FORMAT"), _format_name(value, "VALUE_FORMAT")


def _one_format_property(properties: Mapping[str, PropertyValue]) -> None:
    """FORMAT sets both formats: it excludes KEY_FORMAT and VALUE_FORMAT (ksqlDB's message)."""
    if "FORMAT" not in properties:
        return
    for other in ("KEY_FORMAT", "VALUE_FORMAT"):
        if other in properties:
            raise ValidationError(
                f"Cannot supply both '{other}' and 'FORMAT' properties, as 'FORMAT' sets both key "
                "and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and "
                "'VALUE_FORMAT'."
            )


def _format_name(value: PropertyValue, prop: str) -> str:
    name = str(value).upper()
    if name in SUPPORTED_FORMATS:
        return name
    if name in LATER_FORMATS:
        raise ValidationError(
            f"{prop} {name} is not supported yet: headwater reads and writes "
            f"{', '.join(sorted(SUPPORTED_FORMATS))}"
        )
    raise ValidationError(f"Unknown format: {name}")


def _columns(create: ast.CreateSource, kind: SourceKind, catalog: Catalog) -> tuple[Column, ...]:
    if not create.columns:
        raise ValidationError("No columns supplied.")
    seen: set[str] = set()
    keys: list[Column] = []
    values: list[Column] = []
    for column in create.columns:
        if column.name in seen:
            raise ValidationError(f"Duplicate column names: {column.name}")
        seen.add(column.name)
        if column.name.upper() in ("ROWPARTITION", "ROWOFFSET"):
            raise ValidationError(
                f"'{column.name.upper()}' is a reserved column name. You cannot "
                "use it as a name for a column."
            )
        _check_header_type(column, catalog)
        resolved = Column(
            name=column.name,
            type=_resolve_type(column.type, catalog).sql(),
            key=column.key or column.primary_key,  # the parser refuses KEY on tables and vice versa
            headers=column.headers,
            header_key=column.header_key,
        )
        (keys if resolved.key else values).append(resolved)
    if kind is SourceKind.TABLE and not keys:
        raise ValidationError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
    return (*keys, *values)


_HEADERS_TYPE = "ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>"


def _check_header_type(column: ast.Column, catalog: Catalog) -> None:
    """HEADERS columns hold every header, HEADER('k') columns one header's bytes (ksqlDB's words)."""
    if not (column.headers or column.header_key):
        return
    text = _resolve_type(column.type, catalog).sql()
    if column.headers and text.upper() != _HEADERS_TYPE.upper():
        raise ValidationError(
            f"Invalid type for HEADERS column: expected {_HEADERS_TYPE}, got {text}"
        )
    if column.header_key and text != "BYTES":
        raise ValidationError(
            f"Invalid type for HEADER('{column.header_key}') column: expected BYTES, got {text}"
        )


def _resolve_type(sql_type: sqltypes.SqlType, catalog: Catalog) -> sqltypes.SqlType:
    """Replace custom type names by their definitions, as ksqlDB does when a source is created."""
    if isinstance(sql_type, sqltypes.CustomType):
        custom = catalog.types.get(sql_type.name)
        if custom is None:
            raise UnknownType(f"Unknown type: {sql_type.name}")
        return _Defined(custom.type)
    if isinstance(sql_type, sqltypes.ArrayType):
        return sqltypes.ArrayType(_resolve_type(sql_type.element, catalog))
    if isinstance(sql_type, sqltypes.MapType):
        return sqltypes.MapType(
            _resolve_type(sql_type.key, catalog), _resolve_type(sql_type.value, catalog)
        )
    if isinstance(sql_type, sqltypes.StructType):
        return sqltypes.StructType(
            tuple(
                sqltypes.StructField(f.name, _resolve_type(f.type, catalog))
                for f in sql_type.fields
            )
        )
    return sql_type


@dataclass(frozen=True, slots=True)
class _Defined(sqltypes.SqlType):
    """A custom type replaced by its (already resolved) definition text."""

    text: str

    def sql(self) -> str:
        return self.text


def _check_formats(columns: tuple[Column, ...], key_format: str, value_format: str) -> None:
    keys = [c for c in columns if c.key]
    values = [c for c in columns if c.in_value]
    for key in keys:
        if "MAP<" in key.type:
            raise ValidationError(
                "Map keys, including types that contain maps, are not supported as they may lead "
                "to unexpected behavior due to inconsistent serialization. Key column name: "
                f"`{key.name}`. Column type: {key.type}. See "
                "https://github.com/confluentinc/ksql/issues/6621 for more."
            )
    # ksqlDB's words: the columns listed in brackets, a type named by its base name; a key
    # format's refusal comes wrapped in what the key serde was asked to hold.
    for fmt, group in ((key_format, keys), (value_format, values)):
        listed = ", ".join(f"`{c.name}` {c.type}" + (" KEY" if c.key else "") for c in group)
        reason = None
        if fmt == "KAFKA" and len(group) > 1:
            reason = f"The 'KAFKA' format only supports a single field. Got: [{listed}]"
        elif fmt == "KAFKA":
            for column in group:
                if not _kafka_primitive(column.type):
                    base = column.type.split("<", 1)[0].split("(", 1)[0]
                    reason = f"The 'KAFKA' format does not support type '{base}'"
                    break
        if reason is None:
            continue
        if group is keys:
            raise ValidationError(
                f"Key format does not support schema.\nformat: {fmt}\nschema: "
                f"Persistence{{columns=[{listed}], features=[]}}\nreason: "
                f"{reason}"
            )
        raise ValidationError(reason)


def _kafka_primitive(type_text: str) -> bool:
    return type_text in {"INTEGER", "BIGINT", "DOUBLE", "STRING", "BYTES"}


def _topic(
    topic: str, properties: Mapping[str, PropertyValue], facts: TopicFacts
) -> tuple[int, tuple[str, int] | None]:
    wanted = properties.get("PARTITIONS")
    if wanted is not None and (
        not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1
    ):
        raise ValidationError(f"Invalid number of partitions in WITH clause: {wanted}")
    if wanted is not None and wanted > MAX_PARTITIONS:
        raise ValidationError(
            f"Invalid number of partitions in WITH clause: {wanted} (at most "
            f"{MAX_PARTITIONS:,} partitions per topic)"
        )
    replicas = properties.get("REPLICAS")
    if replicas is not None and (
        not isinstance(replicas, int)
        or isinstance(replicas, bool)
        or replicas < 1
        and replicas != -1
    ):
        raise ValidationError(f"Invalid number of replicas in WITH clause: {replicas}")
    _check_topic_name(topic)
    existing = facts.partitions.get(topic)
    if existing is None:
        if wanted is None:
            raise TopicError(f"Kafka topic does not exist: {topic}")
        return int(wanted), (topic, int(wanted))
    if wanted is not None and wanted != existing:
        raise TopicError(
            f"A Kafka topic with the name '{topic}' already exists, with different partition/replica "
            f"configuration than required. KSQL expects {wanted} partitions (topic has {existing})."
        )
    return existing, None


MAX_PARTITIONS = 10_000
"""Most partitions a statement may ask a new topic to have (Kafka clusters cap partitions per
broker; far more would only fail later, after a long wait, inside the admin client)."""
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def _check_topic_name(topic: str) -> None:
    """Kafka's rules for topic names (``Topic.validate``), in its words."""
    if topic in ("", ".", ".."):
        raise ValidationError(f"Topic name is illegal, it can't be empty, '.' or '..': {topic!r}")
    if len(topic) > 249:
        raise ValidationError(
            f"Topic name is illegal, it can't be longer than 249 characters, topic name: {topic}"
        )
    if not _TOPIC_NAME.fullmatch(topic):
        raise ValidationError(
            f'Topic name "{topic}" is illegal, it contains a character other '
            "than ASCII alphanumerics, '.', '_' and '-'"
        )


def _timestamp_column(
    properties: Mapping[str, PropertyValue], columns: tuple[Column, ...]
) -> str | None:
    name = properties.get("TIMESTAMP")
    if name is None:
        return None
    wanted = str(name)
    column = next((c for c in columns if c.name in (wanted, wanted.upper())), None)
    if column is None:
        raise ValidationError(
            f"The TIMESTAMP column set in the WITH clause does not exist in the schema: '{wanted}'"
        )
    if column.type not in {"BIGINT", "TIMESTAMP", "STRING"}:
        raise ValidationError(
            f"Timestamp column, `{column.name}`, should be LONG(INT64), TIMESTAMP, or a String "
            "with a timestamp_format specified."
        )
    if column.type == "STRING" and "TIMESTAMP_FORMAT" not in properties:
        raise ValidationError(
            f"A String timestamp field has been specified without also specifying the "
            f"timestamp_format property: {column.name}"
        )
    return column.name


def _plan_drop(drop: ast.Drop, catalog: Catalog) -> Plan:
    source = catalog.source(drop.name)
    if source is None:
        if drop.if_exists:
            return Plan(None, f"Source `{drop.name}` does not exist.")
        kind = SourceKind(drop.kind)
        raise UnknownSource(
            f"{kind.value.capitalize()} {drop.name} does not exist."
            + catalog.alternatives(drop.name, kind)
        )
    if source.kind.value != drop.kind:
        raise ValidationError(
            f"Incompatible data source type is {source.kind.value}, but statement was DROP {drop.kind}"
        )
    refusal = catalog.drop_refusal(drop.name)
    if refusal is not None:
        raise SourceInUse(refusal)
    if drop.delete_topic and source.read_only:
        raise ValidationError(f"Cannot delete topic for read-only source: {drop.name}")
    command: dict[str, Any] = {"type": "drop_source", "name": drop.name}
    if drop.delete_topic:
        # Every server stops reading the topic when it applies the command, before it is deleted.
        command["delete_topic"] = source.topic
    return Plan(command, delete_topic=source.topic if drop.delete_topic else None)


def _plan_create_as_select(
    create: ast.CreateAsSelect,
    catalog: Catalog,
    facts: TopicFacts,
    analyze: QueryAnalyzer,
    defaults: FormatDefaults = KSQLDB_DEFAULTS,
) -> Plan:
    kind = SourceKind(create.kind)
    noun = kind.value.lower()
    if create.query.limit is not None:  # ksqlDB's parser refuses it (AstBuilder)
        raise ValidationError(
            f"CREATE {kind.value} AS SELECT statements don't support LIMIT clause."
        )
    existing = catalog.source(create.name)
    if existing is not None:
        if create.if_not_exists:
            return Plan(None, f"Cannot add {noun} {create.name}: it already exists.")
        if create.or_replace:
            raise ValidationError(
                f"CREATE OR REPLACE {kind.value} ... AS SELECT is not supported yet: terminate "
                f"{existing.query_id or 'its query'}, drop {create.name}, then create it again."
            )
        raise SourceExists(
            f"Cannot add {noun} '{create.name}': A {existing.kind.value.lower()} "
            "with the same name already exists"
        )
    allowed = SINK_PROPERTIES | (TABLE_SINK_PROPERTIES if kind is SourceKind.TABLE else set())
    unknown = sorted(n for n in create.properties if n.upper() not in allowed)
    if unknown:
        raise ValidationError(f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}")
    properties = {n.upper(): v for n, v in create.properties.items() if v is not None}
    _check_delimiters(properties)
    shape = analyze.shape(create.query, catalog, create.name)
    if shape.kind is not kind:
        produced = shape.kind.value
        raise ValidationError(
            f"Invalid result type. Your SELECT query produces a {produced}. "
            f"Please use CREATE {produced} AS SELECT statement instead."
        )
    source = catalog.source(shape.sources[0])
    assert source is not None  # the analysis resolved it
    columns = shape.columns
    keyless = not any(c.key for c in columns)
    key_format, value_format = _sink_formats(properties, source, keyless, defaults.key)
    for side, fmt, source_fmt in (
        ("KEY", key_format, source.key_format),
        ("VALUE", value_format, source.value_format),
    ):
        inherited = source.property(f"{side}_DELIMITER")
        if fmt == source_fmt == "DELIMITED" and inherited is not None:
            properties.setdefault(f"{side}_DELIMITER", inherited)  # as ksqlDB: the source's
    _check_format_configs(properties, (key_format, value_format))
    _check_formats(columns, key_format, value_format)
    _check_sink_schema_ids(properties, columns, (key_format, value_format), facts)
    topic = str(properties.get("KAFKA_TOPIC") or create.name)
    _check_registry(topic, (key_format, value_format), facts)
    wanted = properties.get(
        "PARTITIONS", source.partitions if topic not in facts.partitions else None
    )
    partitions, create_topic = _topic(topic, {"PARTITIONS": wanted} if wanted else {}, facts)
    timestamp = _timestamp_column(properties, columns)
    if shape.windowed is not None:
        properties["WINDOW_TYPE"] = shape.windowed
        if shape.window_size_ms is not None:
            properties["WINDOW_SIZE"] = f"{shape.window_size_ms} MILLISECONDS"
    sink = Source(
        kind=kind,
        name=create.name,
        columns=columns,
        topic=topic,
        partitions=partitions,
        key_format=key_format,
        value_format=value_format,
        properties=tuple(sorted(properties.items())),
        statement_text=create.text.strip(),
        timestamp_column=timestamp,
        windowed=shape.windowed,
    )
    analyze.check_sink(sink, catalog)
    query = {
        "kind": "CTAS" if kind is SourceKind.TABLE else "CSAS",
        "statementText": create.text.strip(),
        "sink": create.name,
        "sources": list(shape.sources),
    }
    command = {
        "type": "start_query",
        "query": query,
        "sink": {"source": source_to_dict(sink), "replace": False},
    }
    return Plan(command, create_topic=create_topic)


def _check_schema_id_format(part: str, fmt: str) -> None:
    """A ``*_SCHEMA_ID`` names a registered schema: the format must be one that has them."""
    if fmt not in INFERRED_FORMATS:
        raise ValidationError(
            f"{part.upper()}_FORMAT should support schema inference when {part.upper()}_SCHEMA_ID "
            f"is provided. Current format is {fmt}."
        )


def _check_sink_schema_ids(
    properties: Mapping[str, PropertyValue],
    columns: Sequence[Column],
    formats: tuple[str, str],
    facts: TopicFacts,
) -> None:
    """A CREATE ... AS SELECT that names the schema its sink writes with (``KEY_SCHEMA_ID``,
    ``VALUE_SCHEMA_ID``): the format must take a registered schema, and the query's columns must
    be that schema's first columns, in order, with its types (ksqlDB's DefaultSchemaInjector:
    the schema may add columns after them, which are written with their defaults)."""
    for part, fmt in zip(("key", "value"), formats, strict=True):
        name = f"{part.upper()}_SCHEMA_ID"
        schema_id = properties.get(name)
        if schema_id is None:
            continue
        _check_schema_id_format(part, fmt)
        subject = f"id:{schema_id}"
        found = facts.schemas.get(subject) if facts.schemas is not None else None
        if found is None or isinstance(found, str):
            raise ValidationError(
                f"Unable to use the {part} schema of {subject}: {found or 'it is not registered'}"
            )
        ours = [(c.name, parse_type(c.type)) for c in columns if c.key == (part == "key")]
        registered = [(n, parse_type(t)) for n, t in found]
        changed = [c for i, c in enumerate(ours) if i >= len(registered) or registered[i] != c]
        if changed:

            def shown(pairs: Sequence[tuple[str, Any]]) -> str:
                return "[" + ", ".join(f"`{n}` {t.sql()}" for n, t in pairs) + "]"

            raise ValidationError(
                f"The following {part} columns are changed, missing or reordered: "
                f"{shown(changed)}. Schema from schema registry is {shown(registered)}"
            )


def _sink_formats(
    properties: Mapping[str, PropertyValue],
    source: Source,
    keyless: bool,
    default_key: str | None = "KAFKA",
) -> tuple[str, str]:
    """A sink's key and value formats: the WITH clause's, else its source's; a key the source
    does not have (its key format NONE: PARTITION BY, GROUP BY, a join) takes the default key
    format (``ksql.persistence.default.format.key``), as in ksqlDB."""
    both = properties.get("FORMAT")
    _one_format_property(properties)
    value = _format_name(
        both or properties.get("VALUE_FORMAT") or source.value_format, "VALUE_FORMAT"
    )
    if keyless:
        given = properties.get("KEY_FORMAT")
        if given is not None:
            _format_name(given, "KEY_FORMAT")  # an unknown format is refused first, as in ksqlDB
        if given is not None and str(given).upper() != "NONE":
            raise ValidationError("Key format specified for stream without key columns.")
        return "NONE", value
    key = both or properties.get("KEY_FORMAT")
    if key is None:
        key = source.key_format if source.key_format != "NONE" else (default_key or "KAFKA")
    return _format_name(key, "KEY_FORMAT"), value


def _target_offset(insert: ast.InsertInto) -> int | None:
    """Where the INSERT INTO's target name starts in its text."""
    found = re.match(r"\s*INSERT\s+INTO\s+", insert.text, re.IGNORECASE)
    return found.end() if found else None


def _plan_insert_select(insert: ast.InsertInto, catalog: Catalog, analyze: QueryAnalyzer) -> Plan:
    target = catalog.source(insert.target)
    if target is None:  # ksqlDB's UnknownSourceException, located at the target's name
        raise UnknownSource(f"Source `{insert.target}` does not exist.", _target_offset(insert))
    if target.kind is not SourceKind.STREAM:
        raise ValidationError(
            f"INSERT INTO can only be used to insert into a stream. {target.name} is a table."
        )
    if any(c.headers or c.header_key is not None for c in target.columns):  # AstSanitizer
        raise ValidationError(f"Cannot insert into {target.name} because it has header columns")
    if target.read_only:
        raise ValidationError(f"Cannot insert into read-only stream: {target.name}")
    shape = analyze.shape(insert.query, catalog, insert.target)
    if shape.kind is not target.kind:
        raise ValidationError(
            f"Incompatible data sink and query result. Data sink ({target.name}) "
            f"type is {target.kind.value} but select query result is "
            f"{shape.kind.value}."
        )
    if target.name in shape.sources:
        raise ValidationError(f"Cannot insert into {target.name}: the query reads from it.")
    sink_columns = tuple(c for c in target.columns if not (c.headers or c.header_key))
    if tuple((c.name, c.type, c.key) for c in shape.columns) != tuple(
        (c.name, c.type, c.key) for c in sink_columns
    ):
        raise ValidationError(
            "Incompatible schema between results and sink.\n"
            f"Result schema is {_columns_sql(shape.columns)}\n"
            f"Sink schema is {_columns_sql(sink_columns)}"
        )
    query = {
        "kind": "INSERTQUERY",
        "statementText": insert.text.strip(),
        "sink": target.name,
        "sources": list(shape.sources),
    }
    return Plan({"type": "start_query", "query": query})


def _columns_sql(columns: tuple[Column, ...]) -> str:
    return ", ".join(f"`{c.name}` {c.type}" + (" KEY" if c.key else "") for c in columns)


def _plan_terminate(terminate: ast.Terminate, catalog: Catalog) -> Plan:
    if terminate.query_id is None:
        ids = sorted(catalog.queries)
        if not ids:
            return Plan(None, "No queries to terminate.")
        return Plan({"type": "terminate_query", "queryIds": ids})
    wanted = terminate.query_id.upper()
    found = next((q for q in catalog.queries if q.upper() == wanted), None)
    if found is None:
        raise ValidationError(f"Unknown queryId: {terminate.query_id}")
    return Plan({"type": "terminate_query", "queryIds": [found]})


def _plan_create_type(create: ast.CreateType, catalog: Catalog) -> Plan:
    if create.name in catalog.types:
        if create.if_not_exists:
            return Plan(None, f"Type {create.name} already exists.")
        raise TypeExists(
            f"Cannot register custom type '{create.name}' since it is already registered with "
            f"type: {catalog.types[create.name].type}"
        )
    sql_type = _resolve_type(create.type, catalog).sql()
    return Plan({"type": "create_type", "name": create.name, "sqlType": sql_type})


def _plan_drop_type(drop: ast.DropType, catalog: Catalog) -> Plan:
    if drop.name not in catalog.types:
        if drop.if_exists:
            return Plan(None, f"Type {drop.name} does not exist.")
        raise UnknownType(f"Type {drop.name} does not exist.")
    return Plan({"type": "drop_type", "name": drop.name})


def _plan_alter_source(alter: ast.AlterSource, catalog: Catalog) -> Plan:
    """ALTER STREAM|TABLE name ADD [COLUMN] c type, ...: the source again, with value columns
    added (ksqlDB's rules and messages); its tables are materialized afresh from their topic,
    so rows written before read the new columns as NULL or, when their values hold them, as
    written."""
    kind = SourceKind(alter.kind)
    existing = catalog.source(alter.name)
    if existing is not None and existing.read_only:  # ksqlDB's AlterSourceFactory, first
        noun = kind.value.lower()
        raise ValidationError(
            f"Cannot alter {noun} '{alter.name}': ALTER operations are not supported on "
            f"source {noun}s."
        )
    if existing is None:
        raise UnknownSource(f"Source {alter.name} does not exist.")
    if existing.kind is not kind:
        raise ValidationError(
            f"Incompatible data source type is {existing.kind.value}, but "
            f"statement was ALTER {kind.value}"
        )
    if existing.query_id is not None or catalog.writers_of(alter.name):
        raise ValidationError("ALTER command is not supported for CREATE ... AS statements.")
    taken = {c.name for c in existing.columns}
    added: list[Column] = []
    for column in alter.columns:
        if column.name in taken:
            raise ValidationError(
                f"Cannot add column `{column.name}` to schema. A column with "
                "the same name already exists."
            )
        if column.key or column.primary_key or column.headers:
            raise ValidationError(
                f"Cannot add column `{column.name}`: ALTER adds value columns only."
            )
        taken.add(column.name)
        added.append(Column(name=column.name, type=_resolve_type(column.type, catalog).sql()))
    columns = (*existing.columns, *added)
    _check_formats(columns, existing.key_format, existing.value_format)
    source = replace(existing, columns=columns, created_offset=-1)
    command = {
        "type": "create_source",
        "source": source_to_dict(source),
        "replace": True,
        "altered": True,
    }
    return Plan(command)
