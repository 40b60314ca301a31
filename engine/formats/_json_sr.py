"""The JSON_SR format: ksqlDB's JSON behind Confluent's wire header, its JSON Schema registered.

Writing, the JSON Schema derived from the columns (:func:`json_schema`, as Kafka Connect's
JsonSchemaData writes it: an object whose properties are the columns, each ``oneOf`` null or its
type, with ``connect.index`` / ``connect.type`` annotations) is registered under
``<topic>-key``/``<topic>-value`` and its id written before the JSON text. Reading strips the
header (records written without one, by a plain JSON producer, are read as they are) and decodes
the JSON as the JSON format does.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from headwater.engine.errors import SerdeError
from headwater.engine.formats.schema_registry import RegisteredSchema, SchemaRegistry
from headwater.sqlparse_ext import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructType,
)

_HEADER = struct.Struct(">bI")

_PRIMITIVES: dict[str, dict[str, Any]] = {
    "BOOLEAN": {"type": "boolean"},
    "INTEGER": {"type": "integer", "connect.type": "int32"},
    "BIGINT": {"type": "integer", "connect.type": "int64"},
    "DOUBLE": {"type": "number", "connect.type": "float64"},
    "STRING": {"type": "string"},
    "BYTES": {"type": "string", "connect.type": "bytes"},
    "DATE": {
        "type": "integer",
        "connect.type": "int32",
        "title": "org.apache.kafka.connect.data.Date",
    },
    "TIME": {
        "type": "integer",
        "connect.type": "int32",
        "title": "org.apache.kafka.connect.data.Time",
    },
    "TIMESTAMP": {
        "type": "integer",
        "connect.type": "int64",
        "title": "org.apache.kafka.connect.data.Timestamp",
    },
}


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def json_type(sql_type: SqlType) -> dict[str, Any]:
    """The JSON Schema of one SQL type (not nullable)."""
    if isinstance(sql_type, DecimalType):
        return {
            "type": "number",
            "title": "org.apache.kafka.connect.data.Decimal",
            "connect.parameters": {
                "scale": str(sql_type.scale),
                "connect.decimal.precision": str(sql_type.precision),
            },
        }
    if isinstance(sql_type, PrimitiveType):
        return dict(_PRIMITIVES[sql_type.name])
    if isinstance(sql_type, ArrayType):
        return {"type": "array", "items": _optional(json_type(sql_type.element))}
    if isinstance(sql_type, MapType):
        return {
            "type": "object",
            "connect.type": "map",
            "additionalProperties": _optional(json_type(sql_type.value)),
        }
    if isinstance(sql_type, StructType):
        return _object(tuple((f.name, f.type) for f in sql_type.fields))
    raise SerdeError(f"The 'JSON_SR' format does not support type '{sql_type}'")


def _object(columns: Sequence[tuple[str, SqlType]]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            name: {**_optional(json_type(t)), "connect.index": index}
            for index, (name, t) in enumerate(columns)
        },
    }


def json_schema(columns: Sequence[tuple[str, SqlType]], unwrapped: bool) -> dict[str, Any]:
    """The JSON Schema ksqlDB registers for these columns."""
    if unwrapped:
        return _optional(json_type(columns[0][1]))
    return _object(columns)


def with_header(
    write: Callable[[Sequence[Any]], bytes | None],
    read: Callable[[bytes], Any],
    columns: Sequence[tuple[str, SqlType]],
    unwrapped: bool,
    subject: str,
    registry: SchemaRegistry | None,
) -> tuple[Callable[[Sequence[Any]], bytes | None], Callable[[bytes], Any], Callable[[], None]]:
    """The JSON format's writer and reader, behind the wire header of the registered schema, and
    what registers that schema (once; the first write does it too)."""
    schema = RegisteredSchema("JSON", json.dumps(json_schema(columns, unwrapped)))
    registered: list[int] = []

    def register() -> None:
        if not registered:
            if registry is None:
                raise SerdeError(
                    f"the JSON_SR format needs a schema registry: set "
                    f"'ksql.schema.registry.url' (subject {subject})"
                )
            registered.append(registry.register(subject, schema))

    def write_sr(values: Sequence[Any]) -> bytes | None:
        data = write(values)
        if data is None:
            return None
        register()
        return _HEADER.pack(0, registered[0]) + data

    def read_sr(data: bytes) -> Any:
        if len(data) >= 5 and data[0] == 0:
            data = data[5:]
        return read(data)

    return write_sr, read_sr, register


def _sql_of(schema: Any) -> str:
    """The SQL type of a JSON Schema (``oneOf`` with null is its other branch), as ksqlDB infers it."""
    if not isinstance(schema, dict):
        raise SerdeError(f"cannot infer a column from the JSON Schema {json.dumps(schema)}")
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches is not None:
        others = [b for b in branches if b.get("type") != "null"]
        if len(others) != 1:
            raise SerdeError(f"cannot infer a column from the JSON Schema {json.dumps(schema)}")
        return _sql_of(others[0])
    kind = schema.get("type")
    connect = schema.get("connect.type")
    title = schema.get("title", "")
    if title == "org.apache.kafka.connect.data.Decimal":
        parameters = schema.get("connect.parameters", {})
        return (
            f"DECIMAL({int(parameters.get('connect.decimal.precision', 64))}, "
            f"{int(parameters.get('scale', 0))})"
        )
    for suffix, sql in ((".Date", "DATE"), (".Time", "TIME"), (".Timestamp", "TIMESTAMP")):
        if title.endswith(suffix):
            return sql
    if kind == "boolean":
        return "BOOLEAN"
    if kind == "integer":
        return "INTEGER" if connect in ("int8", "int16", "int32") else "BIGINT"
    if kind == "number":
        return "DOUBLE"
    if kind == "string":
        return "BYTES" if connect == "bytes" else "STRING"
    if kind == "array":
        return f"ARRAY<{_sql_of(schema.get('items', {}))}>"
    if kind == "object":
        if "properties" in schema:
            listed = ", ".join(f"`{name}` {_sql_of(t)}" for name, t in schema["properties"].items())
            return f"STRUCT<{listed}>"
        return f"MAP<STRING, {_sql_of(schema.get('additionalProperties', {}))}>"
    raise SerdeError(f"cannot infer a column from the JSON Schema {json.dumps(schema)}")


def inferred_columns(
    schema_text: str, unwrapped_name: str, upper: bool = False
) -> tuple[tuple[str, str], ...]:
    """The columns ksqlDB infers from a registered JSON Schema: an object's properties (names
    upper-cased with ``upper``, as for a schema found by subject; as written for one named by
    id), or one column named ``unwrapped_name``.

    Raises:
        SerdeError: If the text is not JSON or has a type no column can hold.
    """
    try:
        schema = json.loads(schema_text)
    except ValueError:
        raise SerdeError("the registered schema is not JSON") from None
    if isinstance(schema, dict) and schema.get("type") == "object" and "properties" in schema:
        return tuple(
            (name.upper() if upper else name, _sql_of(t))
            for name, t in schema["properties"].items()
        )
    return ((unwrapped_name, _sql_of(schema)),)
