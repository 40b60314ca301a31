"""The AVRO format: Avro binary behind Confluent's wire header, schemas in a schema registry.

Writing, the schema is the one ksqlDB derives from the columns (:func:`avro_schema`): a record
``io.confluent.ksql.avro_schemas.KsqlDataSourceSchema`` whose fields are the columns, each optional
(a union with null, default null); nested structs are records named after their path
(``KsqlDataSourceSchema_ADDRESS``); DECIMAL is ``bytes`` with the ``decimal`` logical type, DATE
``int``/``date``, TIME ``int``/``time-millis``, TIMESTAMP ``long``/``timestamp-millis``; a MAP is
an Avro map (STRING keys only, as ksqlDB).
One unwrapped column (a key, or a value with ``WRAP_SINGLE_VALUE=false``) is that column's schema
alone. The schema is registered once per serde; every record carries its id.

Reading, the writer's schema comes from the registry by the id in the record, and the datum is
converted to the columns' types: record fields are matched to columns by name (exactly, then
ignoring case), enums read as STRING, ``float`` as DOUBLE, ``int`` into BIGINT, and a primitive into
STRING as its text, as ksqlDB coerces. Pure apart from the registry calls.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import fastavro
import fastavro.validation

from headwater.engine.errors import SerdeError, record_failure
from headwater.engine.formats.schema_registry import RegisteredSchema, SchemaRegistry
from headwater.sqlparse_ext import (
    ArrayType,
    DecimalType,
    MapType,
    ParseError,
    PrimitiveType,
    SqlType,
    StructType,
    parse_type,
)
from headwater.sqlparse_ext.sqltypes import format_double

NAMESPACE = "io.confluent.ksql.avro_schemas"
RECORD = "KsqlDataSourceSchema"
_HEADER = struct.Struct(">bI")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_DATE = datetime.date(1970, 1, 1)

_PRIMITIVES: dict[str, Any] = {
    "BOOLEAN": "boolean",
    "INTEGER": "int",
    "BIGINT": "long",
    "DOUBLE": "double",
    "STRING": "string",
    "BYTES": "bytes",
    "DATE": {"type": "int", "logicalType": "date"},
    "TIME": {"type": "int", "logicalType": "time-millis"},
    "TIMESTAMP": {"type": "long", "logicalType": "timestamp-millis"},
}


def avro_type(sql_type: SqlType, name: str, namespace: str = NAMESPACE) -> Any:
    """The Avro schema of one SQL type (not nullable); ``name`` names nested records, in
    ``namespace``."""
    if isinstance(sql_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": sql_type.precision,
            "scale": sql_type.scale,
            "connect.version": 1,
            "connect.parameters": {
                "scale": str(sql_type.scale),
                "connect.decimal.precision": str(sql_type.precision),
            },
            "connect.name": "org.apache.kafka.connect.data.Decimal",
        }
    if isinstance(sql_type, PrimitiveType):
        found = _PRIMITIVES.get(sql_type.name)
        if found is None:
            raise SerdeError(f"The 'AVRO' format does not support type '{sql_type.name}'")
        return found
    if isinstance(sql_type, ArrayType):
        return {"type": "array", "items": _optional(avro_type(sql_type.element, name, namespace))}
    if isinstance(sql_type, MapType):
        if sql_type.key != PrimitiveType("STRING"):
            raise SerdeError("Avro only supports MAPs with STRING keys")
        value = avro_type(sql_type.value, f"{name}_MapValue", namespace)
        return {"type": "map", "values": _optional(value)}
    if isinstance(sql_type, StructType):
        return _record(tuple((f.name, f.type) for f in sql_type.fields), name, namespace)
    raise SerdeError(f"The 'AVRO' format does not support type '{sql_type}'")


def _optional(schema: Any) -> Any:
    return ["null", schema]


def _avro_name(name: str) -> str:
    """``name`` when Avro allows it as a field name (Avro's ``Schema.validateName``: a letter or
    ``_``, then letters, digits or ``_``), else ksqlDB's refusal."""
    if not name:
        raise SerdeError("Schema is not compatible with Avro: Empty name")
    if not (name[0].isalpha() or name[0] == "_"):
        raise SerdeError(f"Schema is not compatible with Avro: Illegal initial character: {name}")
    if not all(c.isalnum() or c == "_" for c in name[1:]):
        raise SerdeError(f"Schema is not compatible with Avro: Illegal character in: {name}")
    return name


def _record(
    columns: Sequence[tuple[str, SqlType]], name: str, namespace: str = NAMESPACE
) -> dict[str, Any]:
    for column, _ in columns:
        _avro_name(column)
    named: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        named["namespace"] = namespace
    return {
        **named,
        "fields": [
            {
                "name": column,
                "type": _optional(avro_type(t, f"{name}_{column}", namespace)),
                "default": None,
            }
            for column, t in columns
        ],
    }


def avro_schema(
    columns: Sequence[tuple[str, SqlType]], unwrapped: bool, full_name: str = ""
) -> Any:
    """The schema ksqlDB registers for these columns (one unwrapped column: its type, optional).

    ``full_name`` (the side's ``*_SCHEMA_FULL_NAME``) names the record, as ksqlDB's AvroSchemas
    names it: ``com.acme.Order`` is the record ``Order`` in the namespace ``com.acme``, and its
    nested records ``Order_<FIELD>``; by default ``io.confluent.ksql.avro_schemas.
    KsqlDataSourceSchema``.
    """
    namespace, name = NAMESPACE, RECORD
    if full_name.strip():
        namespace, _, name = full_name.strip().rpartition(".")
    if unwrapped:
        ((_, sql_type),) = columns
        return _optional(avro_type(sql_type, name, namespace))
    return _record(columns, name, namespace)


# -- reading: an Avro datum to the value model ----------------------------------------------------


def _string(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_double(value)
    if isinstance(value, int | Decimal):
        return str(value)
    raise SerdeError(f"{where}: cannot read {type(value).__name__} as STRING")


def _number(kind: type, sql: str) -> Callable[[Any, str], Any]:
    def read(value: Any, where: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise SerdeError(f"{where}: cannot read {type(value).__name__} as {sql}")
        return kind(value)

    return read


def _days(value: Any, where: str) -> Any:
    if isinstance(value, datetime.date):
        return (value - _EPOCH_DATE).days
    return _number(int, "DATE")(value, where)


def _millis_of_day(value: Any, where: str) -> Any:
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    return _number(int, "TIME")(value, where)


def _epoch_millis(value: Any, where: str) -> Any:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return _number(int, "TIMESTAMP")(value, where)


def _bool(value: Any, where: str) -> Any:
    if not isinstance(value, bool):
        raise SerdeError(f"{where}: cannot read {type(value).__name__} as BOOLEAN")
    return value


def _bytes(value: Any, where: str) -> Any:
    if isinstance(value, str):  # an Avro 'fixed' or string read into BYTES
        return value.encode("utf-8")
    if not isinstance(value, bytes | bytearray):
        raise SerdeError(f"{where}: cannot read {type(value).__name__} as BYTES")
    return bytes(value)


_READERS: dict[str, Callable[[Any, str], Any]] = {
    "BOOLEAN": _bool,
    "INTEGER": _number(int, "INTEGER"),
    "BIGINT": _number(int, "BIGINT"),
    "DOUBLE": _number(float, "DOUBLE"),
    "STRING": _string,
    "BYTES": _bytes,
    "DATE": _days,
    "TIME": _millis_of_day,
    "TIMESTAMP": _epoch_millis,
}


def reader(sql_type: SqlType) -> Callable[[Any, str], Any]:
    """A converter of Avro datums (as fastavro reads them) to values of ``sql_type``."""
    if isinstance(sql_type, DecimalType):

        def read_decimal(value: Any, where: str) -> Any:
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                raise SerdeError(f"{where}: cannot read {type(value).__name__} as {sql_type}")
            return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)

        return _nullable(read_decimal)
    if isinstance(sql_type, PrimitiveType):
        return _nullable(_READERS[sql_type.name])
    if isinstance(sql_type, ArrayType):
        element = reader(sql_type.element)

        def read_array(value: Any, where: str) -> Any:
            if not isinstance(value, list):
                raise SerdeError(f"{where}: cannot read {type(value).__name__} as ARRAY")
            return [element(v, where) for v in value]

        return _nullable(read_array)
    if isinstance(sql_type, MapType):
        key, val = reader(sql_type.key), reader(sql_type.value)

        def read_map(value: Any, where: str) -> Any:
            if isinstance(value, list):  # Connect's array of key/value records
                return {key(e.get("key"), where): val(e.get("value"), where) for e in value}
            if not isinstance(value, dict):
                raise SerdeError(f"{where}: cannot read {type(value).__name__} as MAP")
            return {key(k, where): val(v, where) for k, v in value.items()}

        return _nullable(read_map)
    if isinstance(sql_type, StructType):
        fields = fields_reader(tuple((f.name, f.type) for f in sql_type.fields))

        def read_struct(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise SerdeError(f"{where}: cannot read {type(value).__name__} as STRUCT")
            return dict(zip((f.name for f in sql_type.fields), fields(value, where)))

        return _nullable(read_struct)
    raise SerdeError(f"The 'AVRO' format does not support type '{sql_type}'")


def _nullable(read: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def read_or_null(value: Any, where: str) -> Any:
        return None if value is None else read(value, where)

    return read_or_null


def fields_reader(
    columns: Sequence[tuple[str, SqlType]],
) -> Callable[[dict[str, Any], str], list[Any]]:
    """Reads the columns from a record (a dict) by name: exactly, else ignoring case."""
    readers = tuple((name, name.upper(), reader(t)) for name, t in columns)

    def read(record: dict[str, Any], where: str) -> list[Any]:
        out = []
        folded: dict[str, Any] | None = None
        for name, upper, read_one in readers:
            if name in record:
                value = record[name]
            else:
                if folded is None:
                    folded = {str(k).upper(): v for k, v in record.items()}
                value = folded.get(upper)
            out.append(read_one(value, f"{where}.{name}" if where else name))
        return out

    return read


# -- the format ------------------------------------------------------------------------------------


def conformed(schema: Any, value: Any, named: dict[str, Any]) -> Any:
    """``value`` shaped for a registered schema it was not made for: a record's fields found by
    name (exactly, else ignoring case), and a field without a value given its default, as the
    Connect converter ksqlDB writes with does (``named``: the named types met so far)."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):
        if value is None:
            return None
        records = (
            [b for b in schema if isinstance(named.get(b, b) if isinstance(b, str) else b, dict)]
            if isinstance(value, dict)
            else []
        )
        return conformed(records[0], value, named) if records else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return conformed(kind, value, named)
    if kind == "record":
        name = schema.get("name")
        if name:
            named[str(name)] = schema
            if schema.get("namespace"):
                named[f"{schema['namespace']}.{name}"] = schema
        if not isinstance(value, dict):
            return value
        folded = {str(k).upper(): v for k, v in value.items()}
        out = {}
        for field in schema.get("fields", []):
            field_name = field["name"]
            given = value[field_name] if field_name in value else folded.get(field_name.upper())
            if given is None and "default" in field:
                out[field_name] = field["default"]
            else:
                out[field_name] = conformed(field["type"], given, named)
        return out
    if kind == "array" and isinstance(value, list):
        return [conformed(schema["items"], v, named) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: conformed(schema["values"], v, named) for k, v in value.items()}
    return value


class AvroSide:
    """The writer and reader of one side (key or value) of a source in the AVRO format."""

    def __init__(
        self,
        columns: Sequence[tuple[str, SqlType]],
        unwrapped: bool,
        subject: str,
        registry: SchemaRegistry | None,
        schema_id: int | None = None,
        full_name: str = "",
    ) -> None:
        self.columns = tuple(columns)
        self.unwrapped = unwrapped
        self.subject = subject
        self._registry = registry
        self.schema = avro_schema(self.columns, unwrapped, full_name)
        self._parsed = fastavro.parse_schema(self.schema)
        #: the registered schema the records are written with (``*_SCHEMA_ID``), once read
        self._given_id = schema_id
        self._given: Any = None
        self._id: int | None = None
        #: the records are written with the subject's newest schema (see ``register``)
        self._latest = False
        self._writers: dict[int, Any] = {}
        if unwrapped:
            self._read_one = reader(self.columns[0][1])
        else:
            self._read_fields = fields_reader(self.columns)

    def _registry_or_fail(self) -> SchemaRegistry:
        if self._registry is None:
            raise SerdeError(
                f"the AVRO format needs a schema registry: set "
                f"'ksql.schema.registry.url' (subject {self.subject})"
            )
        return self._registry

    def register(self) -> None:
        """Registers the side's schema (once), unless it writes with one the statement names or
        with the subject's newest schema: when that schema holds exactly the side's columns (a
        source whose columns were taken from it), records are written with it, as the topic's
        producers write them, and no version of the user's subject is added (one that named its
        record otherwise would be refused as incompatible, or would change the subject)."""
        if self._id is not None or self._given_id is not None:
            return
        registry = self._registry_or_fail()
        latest = registry.latest(self.subject)
        if not self.unwrapped and latest is not None and self._holds_the_columns(latest[1]):
            self._given_id, self._latest = latest[0], True
            return
        self._id = registry.register(
            self.subject, RegisteredSchema("AVRO", json.dumps(self.schema))
        )

    def _holds_the_columns(self, schema: RegisteredSchema) -> bool:
        """Whether ``schema``'s inferred columns are the side's, by name and type."""
        if schema.kind != "AVRO":
            return False
        try:
            found = inferred_columns(schema.text, self.columns[0][0])
            wanted = tuple((name.upper(), str(sql_type)) for name, sql_type in self.columns)
            return tuple((n, str(parse_type(t))) for n, t in found) == wanted
        except (SerdeError, ParseError):
            return False

    def write(self, values: Sequence[Any]) -> bytes | None:
        datum: Any = (
            values[0]
            if self.unwrapped
            else {name: value for (name, _), value in zip(self.columns, values)}
        )
        self.register()
        if self._latest and self._given_id is not None:
            try:
                return self._write(datum)
            except SerdeError:
                # the subject's schema cannot hold this row (a NULL in a required field, say):
                # from now on the side's own schema, registered as ksqlDB registers it
                self._given_id, self._given, self._id, self._latest = None, None, None, False
                self._id = self._registry_or_fail().register(
                    self.subject, RegisteredSchema("AVRO", json.dumps(self.schema))
                )
        return self._write(datum)

    def _write(self, datum: Any) -> bytes:
        parsed = self._parsed
        if self._given_id is not None:  # written with the schema the statement (or subject) names
            if self._given is None:
                registered = self._registry_or_fail().schema(self._given_id)
                if registered.kind != "AVRO":
                    raise SerdeError(f"schema {self._given_id} is {registered.kind}, not AVRO")
                raw = json.loads(registered.text)
                self._given = (raw, fastavro.parse_schema(raw))
                self._id = self._given_id
            raw, parsed = self._given
            datum = conformed(raw, datum, {})
            # fastavro writes what it is given (None as false in a boolean): a row is checked
            # against a schema it was not made for
            if self._latest and not fastavro.validation.validate(datum, parsed, raise_errors=False):
                raise SerdeError(f"the row does not fit schema {self._given_id}")
        assert self._id is not None
        buffer = io.BytesIO()
        buffer.write(_HEADER.pack(0, self._id))
        try:
            fastavro.schemaless_writer(buffer, parsed, datum)
        except (ValueError, TypeError, OverflowError) as exc:
            raise SerdeError(f"cannot write AVRO: {exc}") from None
        return buffer.getvalue()

    def read(self, data: bytes) -> list[Any] | None:
        if len(data) < 5 or data[0] != 0:
            raise SerdeError("Unknown magic byte!")
        schema_id = _HEADER.unpack_from(data)[1]
        writer = self._writers.get(schema_id)
        if writer is None:
            registered = self._registry_or_fail().schema(schema_id)
            if registered.kind != "AVRO":
                raise SerdeError(f"schema {schema_id} is {registered.kind}, not AVRO")
            writer = self._writers[schema_id] = fastavro.parse_schema(json.loads(registered.text))
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(memoryview(data)[5:]), writer, None)
        except (ValueError, TypeError, EOFError, IndexError) as exc:
            raise SerdeError(f"not AVRO of schema {schema_id}: {record_failure(exc)}") from None
        if self.unwrapped:
            return [self._read_one(datum, self.columns[0][0])]
        if datum is None:
            return None
        if not isinstance(datum, dict):
            if len(self.columns) == 1:  # an anonymous value read into the one column
                return [reader(self.columns[0][1])(datum, self.columns[0][0])]
            raise SerdeError(f"expected an AVRO record, got {type(datum).__name__}")
        return self._read_fields(datum, "")


# -- inference: the columns of a registered schema --------------------------------------------------


def _sql_of(schema: Any, upper: bool = True) -> str:
    """The SQL type of an Avro schema (a union with null is its other branch), as ksqlDB infers it."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise SerdeError(f"cannot infer a column from the Avro union {json.dumps(schema)}")
        return _sql_of(branches[0], upper)
    kind = schema.get("type") if isinstance(schema, dict) else schema
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if isinstance(kind, dict | list):
        return _sql_of(kind, upper)
    if logical == "decimal":
        return f"DECIMAL({int(schema['precision'])}, {int(schema.get('scale', 0))})"
    if logical == "date":
        return "DATE"
    if logical in ("time-millis", "time-micros"):
        return "TIME"
    if logical in ("timestamp-millis", "timestamp-micros"):
        return "TIMESTAMP"
    simple = {
        "boolean": "BOOLEAN",
        "int": "INTEGER",
        "long": "BIGINT",
        "float": "DOUBLE",
        "double": "DOUBLE",
        "string": "STRING",
        "enum": "STRING",
        "bytes": "BYTES",
        "fixed": "BYTES",
    }
    if kind in simple:
        return simple[kind]
    if kind == "array":
        items = schema["items"]
        entry = items if isinstance(items, dict) else None
        if (
            entry is not None
            and entry.get("type") == "record"
            and [f["name"] for f in entry["fields"]] == ["key", "value"]
        ):
            fields = {f["name"]: f["type"] for f in entry["fields"]}
            return f"MAP<{_sql_of(fields['key'], upper)}, {_sql_of(fields['value'], upper)}>"
        return f"ARRAY<{_sql_of(items, upper)}>"
    if kind == "map":
        return f"MAP<STRING, {_sql_of(schema['values'], upper)}>"
    if kind == "record":
        listed = ", ".join(
            f"`{f['name'].upper() if upper else f['name']}` {_sql_of(f['type'], upper)}"
            for f in schema["fields"]
        )
        return f"STRUCT<{listed}>"
    raise SerdeError(f"cannot infer a column from the Avro type {json.dumps(schema)}")


def inferred_columns(
    schema_text: str, unwrapped_name: str, upper: bool = True
) -> tuple[tuple[str, str], ...]:
    """The columns ksqlDB infers from a registered Avro schema: a record's fields (names upper-cased,
    unless ``upper`` is False: a schema named by id keeps its names), or one column named
    ``unwrapped_name`` (ROWKEY, ROWVAL) for any other schema.

    Raises:
        SerdeError: If the schema is not Avro JSON or has a type no column can hold.
    """
    try:
        schema = json.loads(schema_text)
    except ValueError:
        raise SerdeError("the registered schema is not Avro JSON") from None
    top = schema
    if isinstance(top, list):
        branches = [b for b in top if b != "null"]
        top = branches[0] if len(branches) == 1 else top
    if isinstance(top, dict) and top.get("type") == "record":
        return tuple(
            (f["name"].upper() if upper else f["name"], _sql_of(f["type"], upper))
            for f in top["fields"]
        )
    return ((unwrapped_name, _sql_of(schema, upper)),)
