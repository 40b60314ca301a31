"""ksqlDB `/ksql` entities as tables, with the ksqlDB CLI's column headers. No I/O.

One builder per entity `@type`, chosen from `BUILDERS` (a dispatch table the shell reuses to print
the same tables). A builder takes the raw entity (a dict) and returns an `EntityTable`: column
names, their ksqlDB type names (for a cursor's `description`) and the rows, sorted as the CLI
sorts them. Values keep their JSON types (`Windowed` is a bool, `Partitions` an int) rather than
the CLI's strings, so a program can use them; a shell formats them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILDERS", "EntityTable", "entity_table", "field_type_text", "schema_type_text"]

Entity = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EntityTable:
    """A table view of one entity: column names, their ksqlDB type names, and the rows."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def _table(columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> EntityTable:
    return EntityTable(
        tuple(name for name, _ in columns),
        tuple(type_name for _, type_name in columns),
        tuple(tuple(row) for row in rows),
    )


def _items(entity: Entity, key: str) -> list[Mapping[str, Any]]:
    value = entity.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _by_name(items: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(items, key=lambda item: str(item.get("name", "")))


def schema_type_text(schema: Mapping[str, Any]) -> str:
    """A field schema object as the ksqlDB CLI prints it (`VARCHAR(STRING)`, `DECIMAL(10, 2)`)."""
    base = str(schema.get("type", "?"))
    member = schema.get("memberSchema")
    if base == "STRING":
        return "VARCHAR(STRING)"
    if base == "ARRAY" and isinstance(member, Mapping):
        return f"ARRAY<{schema_type_text(member)}>"
    if base == "MAP" and isinstance(member, Mapping):
        return f"MAP<STRING, {schema_type_text(member)}>"
    if base == "STRUCT":
        inner = ", ".join(
            f"{f.get('name')} {schema_type_text(f.get('schema') or {})}"
            for f in _items(schema, "fields")
        )
        return f"STRUCT<{inner}>"
    params = schema.get("parameters")
    if base == "DECIMAL" and isinstance(params, Mapping) and params:
        return f"DECIMAL({params.get('precision')}, {params.get('scale')})"
    return base


def field_type_text(field: Mapping[str, Any], *, is_table: bool, window_type: str | None) -> str:
    """A DESCRIBE `Type` cell as the ksqlDB CLI prints it, with its `(key)`-style suffix."""
    text = schema_type_text(field.get("schema") or {})
    kind = field.get("type")
    if kind == "KEY":
        window = f" (Window type: {window_type})" if window_type else ""
        return f"{text:<16} {'(primary key)' if is_table else '(key)'}{window}"
    if kind == "HEADER":
        header = field.get("headerKey")
        return f"{text:<16} " + (f"(header('{header}'))" if header else "(headers)")
    return text


def _current_status(entity: Entity) -> EntityTable:
    status = entity.get("commandStatus") or {}
    return _table(
        [("Command ID", "STRING"), ("Status", "STRING"), ("Message", "STRING")],
        [[entity.get("commandId"), status.get("status"), status.get("message")]],
    )


def _sources(title: str) -> Callable[[Entity], EntityTable]:
    key = "streams" if title == "Stream" else "tables"

    def build(entity: Entity) -> EntityTable:
        return _table(
            [
                (f"{title} Name", "STRING"),
                ("Kafka Topic", "STRING"),
                ("Key Format", "STRING"),
                ("Value Format", "STRING"),
                ("Windowed", "BOOLEAN"),
            ],
            [
                [
                    s.get("name"),
                    s.get("topic"),
                    s.get("keyFormat"),
                    s.get("valueFormat"),
                    bool(s.get("isWindowed")),
                ]
                for s in _by_name(_items(entity, key))
            ],
        )

    return build


def _query_status(query: Mapping[str, Any]) -> Any:
    counts = query.get("statusCount")
    if isinstance(counts, Mapping) and counts:
        return ",".join(f"{state}:{n}" for state, n in counts.items())
    return query.get("state", "N/A")


def _queries(entity: Entity) -> EntityTable:
    return _table(
        [
            ("Query ID", "STRING"),
            ("Query Type", "STRING"),
            ("Status", "STRING"),
            ("Sink Name", "STRING"),
            ("Sink Kafka Topic", "STRING"),
            ("Query String", "STRING"),
        ],
        [
            [
                q.get("id"),
                q.get("queryType"),
                _query_status(q),
                ",".join(q.get("sinks") or []),
                ",".join(q.get("sinkKafkaTopics") or []),
                " ".join(str(q.get("queryString", "")).splitlines()),
            ]
            for q in _items(entity, "queries")
        ],
    )


def _properties(entity: Entity) -> EntityTable:
    overwritten = set(entity.get("overwrittenProperties") or [])
    defaults = set(entity.get("defaultProperties") or [])

    def override(name: Any) -> str:
        return "SESSION" if name in overwritten else "" if name in defaults else "SERVER"

    return _table(
        [
            ("Property", "STRING"),
            ("Scope", "STRING"),
            ("Default override", "STRING"),
            ("Effective Value", "STRING"),
        ],
        [
            [
                p.get("name"),
                p.get("scope"),
                override(p.get("name")),
                "NULL" if p.get("value") is None else p.get("value"),
            ]
            for p in _by_name(_items(entity, "properties"))
        ],
    )


def _replicas(replica_info: Sequence[Any]) -> str:
    """The CLI's replica cell: one number when all partitions agree, else a list."""
    if not replica_info:
        return "0"
    if len(set(replica_info)) == 1:
        return str(replica_info[0])
    return ", ".join(str(r) for r in replica_info)


def _kafka_topics(entity: Entity) -> EntityTable:
    return _table(
        [("Kafka Topic", "STRING"), ("Partitions", "INTEGER"), ("Replicas", "STRING")],
        [
            [t.get("name"), len(t.get("replicaInfo") or []), _replicas(t.get("replicaInfo") or [])]
            for t in _items(entity, "topics")
        ],
    )


def _variables(entity: Entity) -> EntityTable:
    return _table(
        [("Variable Name", "STRING"), ("Value", "STRING")],
        [[v.get("name"), v.get("value")] for v in _by_name(_items(entity, "variables"))],
    )


def _fields_table(description: Mapping[str, Any], *, is_table: bool) -> EntityTable:
    window = description.get("windowType")
    return _table(
        [("Field", "STRING"), ("Type", "STRING")],
        [
            [f.get("name"), field_type_text(f, is_table=is_table, window_type=window)]
            for f in _items(description, "fields")
        ],
    )


def _source_description(entity: Entity) -> EntityTable:
    description = entity.get("sourceDescription") or {}
    return _fields_table(description, is_table=str(description.get("type")).upper() == "TABLE")


def _query_description(entity: Entity) -> EntityTable:
    return _fields_table(entity.get("queryDescription") or {}, is_table=False)


def _query_descriptions(entity: Entity) -> EntityTable:
    """SHOW QUERIES EXTENDED: one row per query."""
    return _table(
        [
            ("Query ID", "STRING"),
            ("Status", "STRING"),
            ("Sources", "STRING"),
            ("Sinks", "STRING"),
            ("Statistics", "STRING"),
            ("Errors", "STRING"),
        ],
        [
            [
                q.get("id"),
                q.get("state"),
                ", ".join(q.get("sources") or []),
                ", ".join(q.get("sinks") or []),
                q.get("statistics", ""),
                "; ".join(str(e.get("errorMessage")) for e in q.get("queryErrors") or []),
            ]
            for q in _items(entity, "queryDescriptions")
        ],
    )


def _type_list(entity: Entity) -> EntityTable:
    types = entity.get("types")
    types = types if isinstance(types, Mapping) else {}
    return _table(
        [("Type Name", "STRING"), ("Schema", "STRING")],
        [
            [name, schema_type_text(types[name])]
            for name in sorted(types)
            if isinstance(types[name], Mapping)
        ],
    )


def _function_names(entity: Entity) -> EntityTable:
    return _table(
        [("Function Name", "STRING"), ("Category", "STRING")],
        [[f.get("name"), f.get("category")] for f in _by_name(_items(entity, "functions"))],
    )


def _message(key: str) -> Callable[[Entity], EntityTable]:
    def build(entity: Entity) -> EntityTable:
        return _table([("Message", "STRING")], [[entity.get(key)]])

    return build


BUILDERS: dict[str, Callable[[Entity], EntityTable]] = {
    "currentStatus": _current_status,
    "streams": _sources("Stream"),
    "tables": _sources("Table"),
    "queries": _queries,
    "properties": _properties,
    "kafka_topics": _kafka_topics,
    "variables": _variables,
    "sourceDescription": _source_description,
    "queryDescription": _query_description,
    "query_descriptions": _query_descriptions,
    "type_list": _type_list,
    "function_names": _function_names,
    "warning_entity": _message("message"),
    "error_entity": _message("errorMessage"),
}
"""Entity `@type` -> table builder."""


def entity_table(entity: Entity) -> EntityTable | None:
    """The table view of one `/ksql` entity.

    Args:
        entity: one element of the `/ksql` answer.

    Returns:
        The table, or None for an entity type without a table view (kept raw by the cursor).
    """
    builder = BUILDERS.get(str(entity.get("@type")))
    return builder(entity) if builder is not None else None
