"""Record keys and values of a source, to and from the bytes of its Kafka topic. Pure (no I/O).

:class:`RowSerde` is built once per source (``RowSerde.for_source``), with every converter
precomputed, and reused for every record. Formats, as ksqlDB writes and reads them:

- **JSON** (``_json``): a value is an object of column name -> value; with one value column
  and ``WRAP_SINGLE_VALUE=false`` it is the bare value. A key with one column is the bare value
  (ksqlDB never wraps keys); several key columns make an object.
- **DELIMITED** (``_delimited``): one CSV record, comma by default, ``VALUE_DELIMITER`` /
  ``KEY_DELIMITER`` (a character, ``TAB`` or ``SPACE``); primitives and DECIMAL only.
- **KAFKA**: one column of INTEGER (4 bytes, big-endian, signed), BIGINT (8 bytes), DOUBLE
  (8-byte IEEE 754, big-endian), STRING (UTF-8) or BYTES (raw), as Kafka's own serializers;
  BOOLEAN, DECIMAL, DATE, TIME, TIMESTAMP and containers are refused, as ksqlDB does.
- **NONE**: no columns; the bytes are ignored (keyless sources).
- **AVRO** (``_avro``): Avro binary behind Confluent's wire header (a zero byte, the schema's
  4-byte id); the schema derived from the columns is registered in the schema registry
  (``schema_registry``) under ``<topic>-key`` / ``<topic>-value``, and records are read with
  their writer's schema, fetched by id. Keys and unwrapped values as for JSON.
- **JSON_SR** (``_json_sr``): JSON behind the same header, its JSON Schema registered.
- **PROTOBUF** / **PROTOBUF_NOSR** (``_protobuf``): protobuf messages of the columns (Kafka
  Connect's layout), behind the header with the ``.proto`` registered, or bare without a registry.

NULL rules: a key whose columns are all NULL is written as a null record key, except that several
JSON key columns make an object of NULLs (as ksqlDB writes them); a null key reads as all NULL. A value whose only column is NULL in an unwrapped format (KAFKA, unwrapped
JSON) is written as a null record value, i.e. a tombstone, as in ksqlDB. Names in a row that are
not value columns (key columns, pseudo columns) are ignored when writing.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.engine.errors import SerdeError, record_failure
from headwater.engine.formats import _avro as avro
from headwater.engine.formats import _delimited as delimited
from headwater.engine.formats import _json as jsonfmt
from headwater.engine.formats import _json_sr as json_sr
from headwater.engine.formats import _protobuf as protobuf
from headwater.engine.formats import schema_registry
from headwater.engine.values import checker, mismatch, resolve_type
from headwater.metastore.catalog import Source
from headwater.metastore.plan import format_configs
from headwater.sqlparse_ext import ArrayType, MapType, PrimitiveType, SqlType, StructType

Writer = Callable[[Sequence[Any]], "bytes | None"]
Reader = Callable[[bytes], "list[Any] | None"]

SUPPORTED_FORMATS = (
    "JSON",
    "DELIMITED",
    "KAFKA",
    "NONE",
    "AVRO",
    "JSON_SR",
    "PROTOBUF",
    "PROTOBUF_NOSR",
)
LATER_FORMATS: tuple[str, ...] = ()
#: Formats whose records name a schema in a schema registry.
REGISTRY_FORMATS = ("AVRO", "PROTOBUF", "JSON_SR")

_KAFKA_STRUCTS = {
    "INTEGER": struct.Struct(">i"),
    "BIGINT": struct.Struct(">q"),
    "DOUBLE": struct.Struct(">d"),
}
_KAFKA_DESERIALIZER = {
    "INTEGER": "IntegerDeserializer",
    "BIGINT": "LongDeserializer",
    "DOUBLE": "DoubleDeserializer",
}
_KAFKA_TYPES = ("INTEGER", "BIGINT", "DOUBLE", "STRING", "BYTES")


@dataclass(frozen=True, slots=True)
class _Side:
    """The key or the value of a record: its columns, and how they are written and read."""

    names: tuple[str, ...]
    checks: tuple[Callable[[Any, str], Any], ...]
    write: Writer
    read: Reader
    nulls_written: bool = False  # all-NULL columns are written (a JSON object), not a null record
    #: registers the side's schema in the schema registry now (formats with one), as its first
    #: write would
    register: Callable[[], None] | None = None
    #: one STRING column in the KAFKA format: a text value is its UTF-8 (`RowSerde.serialize_key`
    #: takes that path first, a sink key per output record)
    utf8: bool = False


@dataclass(frozen=True, slots=True)
class RowSerde:
    """Serializer and deserializer of one source's keys and values.

    Attributes:
        source_name: the source's name, for messages.
        topic: the source's topic, for messages.
        key_names: the key columns, in order.
        value_names: the value columns, in order.
    """

    source_name: str
    topic: str
    key_names: tuple[str, ...]
    value_names: tuple[str, ...]
    _key: _Side
    _value: _Side

    @classmethod
    def for_source(
        cls,
        source: Source,
        custom_types: Mapping[str, Any] | None = None,
        registry: schema_registry.SchemaRegistry | None = None,
    ) -> RowSerde:
        """The serde of ``source``'s key and value formats, built once.

        Args:
            source: the stream or table.
            custom_types: CREATE TYPE names -> type text (the catalog's ``types`` works too).
            registry: the schema registry of the AVRO format (default: the process's, see
                :func:`headwater.engine.formats.schema_registry.current`).

        Raises:
            SerdeError: If a format is unknown or not supported yet (AVRO, PROTOBUF, JSON_SR), a
                column's type is not allowed in its format, or a format property is invalid.
        """
        custom = custom_types or {}
        keys = tuple((c.name, resolve_type(c.type, custom)) for c in source.key_columns)
        values = tuple((c.name, resolve_type(c.type, custom)) for c in source.value_columns)
        wrap = _wrap_single_value(source, len(values))
        if registry is None:
            registry = schema_registry.current()
        key_side = _side(source, "key", source.key_format, keys, wrap=False, registry=registry)
        value_side = _side(
            source, "value", source.value_format, values, wrap=wrap, registry=registry
        )
        return cls(
            source.name, source.topic, key_side.names, value_side.names, key_side, value_side
        )

    def register_schemas(self, parts: Sequence[str] = ("key", "value")) -> None:
        """Registers the key's and then the value's schema (``parts``: which), for the formats
        that keep theirs in the schema registry, as the first record written would."""
        for part in parts:
            side = self._key if part == "key" else self._value
            if side.register is not None:
                side.register()

    def serialize_key(self, key: Sequence[Any]) -> bytes | None:
        """The record key for ``key`` (values in key-column order); None if keyless or all NULL (see the module docstring).

        Raises:
            SerdeError: If the tuple has the wrong length or a value does not fit its column.
        """
        side = self._key
        if side.utf8 and len(key) == 1 and type(key[0]) is str:
            try:
                return key[0].encode("utf-8")
            except UnicodeEncodeError:
                pass  # the general path says which column
        if not side.names:
            return None
        if len(key) != len(side.names):
            raise SerdeError(
                f"{self.source_name} has {len(side.names)} key column(s) "
                f"({', '.join(side.names)}), got a key of {len(key)} value(s)"
            )
        checked = [check(v, name) for check, v, name in zip(side.checks, key, side.names)]
        if not side.nulls_written and all(v is None for v in checked):
            return None
        return _write(side, checked, "key")

    def deserialize_key(self, data: bytes | None) -> tuple[Any, ...]:
        """The key columns' values of a record key (all None for a null key; () if keyless).

        Raises:
            SerdeError: If the bytes do not fit the key format and columns, or reading them
                raised anything else (a hostile record is the record's fault, never the caller's).
        """
        side = self._key
        if not side.names:
            return ()
        if data is None:
            return (None,) * len(side.names)
        try:
            values = side.read(data)
            if values is None:
                return (None,) * len(side.names)
            if isinstance(values, dict):
                return tuple(values[name] for name in side.names)
            return tuple(values)
        except Exception as exc:  # noqa: BLE001 - whatever a record's bytes cause is their fault
            raise SerdeError(
                f"Failed to deserialize key from topic: {self.topic}. {record_failure(exc)}"
            ) from None

    def serialize_value(self, row: Mapping[str, Any] | None) -> bytes | None:
        """The record value for a row (value columns by name); None for a tombstone.

        Raises:
            SerdeError: If a value does not fit its column, naming the column.
        """
        if row is None:
            return None
        side = self._value
        get = row.get
        checked = [check(get(name), name) for check, name in zip(side.checks, side.names)]
        return _write(side, checked, "value")

    def deserialize_value(self, data: bytes | None) -> dict[str, Any] | None:
        """The value columns of a record value, by name; None for a tombstone (or JSON null).

        Raises:
            SerdeError: If the bytes do not fit the value format and columns, or reading them
                raised anything else (a hostile record is the record's fault, never the caller's).
        """
        if data is None:
            return None
        side = self._value
        try:
            values = side.read(data)
            if values is None:
                return None
            if isinstance(values, dict):
                return values
            return dict(zip(side.names, values))
        except Exception as exc:  # noqa: BLE001 - whatever a record's bytes cause is their fault
            raise SerdeError(
                f"Failed to deserialize value from topic: {self.topic}. {record_failure(exc)}"
            ) from None


def json_object_values(source: Source) -> bool:
    """Whether ``source``'s values are JSON objects of its value columns (JSON, wrapped)."""
    return source.value_format.upper() == "JSON" and _wrap_single_value(
        source, len(source.value_columns)
    )


def _write(side: _Side, values: list[Any], part: str) -> bytes | None:
    try:
        return side.write(values)
    except UnicodeEncodeError as exc:
        text = exc.object if isinstance(exc.object, str) else ""
        where = next(
            (n for n, v in zip(side.names, values) if isinstance(v, str) and v in text), part
        )
        raise SerdeError(f"{where}: text cannot be written as UTF-8 ({exc.reason})") from None


def _truthy(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _wrap_single_value(source: Source, count: int) -> bool:
    """The value's WRAP_SINGLE_VALUE setting: True unless the property says false."""
    prop = source.property("WRAP_SINGLE_VALUE")
    if prop is None:
        return True
    if count != 1:
        raise SerdeError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
    fmt = source.value_format.upper()
    if _truthy(prop) and fmt in ("KAFKA", "DELIMITED"):
        raise SerdeError(f"Format '{fmt}' does not support 'WRAP_SINGLE_VALUE' set to 'true'.")
    if not _truthy(prop) and fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
        raise SerdeError(f"Format '{fmt}' does not support 'WRAP_SINGLE_VALUE' set to 'false'.")
    return _truthy(prop)


def _describe_columns(columns: tuple[tuple[str, SqlType], ...], part: str = "value") -> str:
    suffix = " KEY" if part == "key" else ""
    return "[" + ", ".join(f"`{name}` {t}{suffix}" for name, t in columns) + "]"


def _walk(t: SqlType) -> list[SqlType]:
    """``t`` and every type nested in it."""
    if isinstance(t, ArrayType):
        return [t, *_walk(t.element)]
    if isinstance(t, MapType):
        return [t, *_walk(t.key), *_walk(t.value)]
    if isinstance(t, StructType):
        return [t, *(x for f in t.fields for x in _walk(f.type))]
    return [t]


def _type_name(t: SqlType) -> str:
    return t.name if isinstance(t, PrimitiveType) else t.sql().split("<")[0].split("(")[0]


def _side(
    source: Source,
    part: str,
    fmt_name: str,
    columns: tuple[tuple[str, SqlType], ...],
    wrap: bool,
    registry: schema_registry.SchemaRegistry | None = None,
) -> _Side:
    """The writer and reader of the key (``part="key"``) or value of ``source``; a key format
    that cannot hold the key columns says so as ksqlDB's key serde does."""
    try:
        return _side_of(source, part, fmt_name, columns, wrap, registry)
    except SerdeError as exc:
        if part != "key" or exc.message.startswith("Key format"):
            raise
        raise SerdeError(
            f"Key format does not support schema.\nformat: {fmt_name.upper()}\n"
            f"schema: Persistence{{columns={_describe_columns(columns, part)}, "
            f"features=[]}}\nreason: {exc.message}"
        ) from None


def _side_of(
    source: Source,
    part: str,
    fmt_name: str,
    columns: tuple[tuple[str, SqlType], ...],
    wrap: bool,
    registry: schema_registry.SchemaRegistry | None = None,
) -> _Side:
    fmt = fmt_name.upper()
    delimiter_prop = f"{part.upper()}_DELIMITER"
    if fmt != "DELIMITED" and source.property(delimiter_prop) is not None:
        raise SerdeError(f"{fmt} does not support the following configs: [delimiter]")
    if fmt in LATER_FORMATS:
        raise SerdeError(
            f"The {part} format {fmt} of {source.name} is not supported yet: headwater reads and "
            f"writes {', '.join(SUPPORTED_FORMATS)}"
        )
    if fmt not in SUPPORTED_FORMATS:
        raise SerdeError(f"Unknown format: {fmt}")
    names = tuple(name for name, _ in columns)
    checks = tuple(checker(t) for _, t in columns)
    if fmt == "NONE":
        if columns:
            raise SerdeError(
                "The 'NONE' format can only be used when no columns are defined. "
                f"Got: {_describe_columns(columns, part)}"
            )
        return _Side(names, checks, lambda values: None, lambda data: [])
    if fmt == "KAFKA":
        utf8 = len(columns) == 1 and _type_name(columns[0][1]) == "STRING"
        return _Side(names, checks, *_kafka(columns, part), utf8=utf8)
    if fmt == "DELIMITED":
        for name, t in columns:
            if not delimited.supports(t):
                raise SerdeError(
                    f"The 'DELIMITED' format does not support type '{_type_name(t)}', "
                    f"column: `{name}`"
                )
        prop = source.property(delimiter_prop)
        delimiter = "," if prop is None else delimited.parse_delimiter(prop, delimiter_prop)
        return _Side(names, checks, *_delimited(columns, delimiter))
    unwrapped = len(columns) == 1 and not wrap
    if fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
        if not columns:
            return _Side(names, checks, lambda values: None, lambda data: [])
        nullable = str(source.property(f"{part.upper()}_PROTOBUF_NULLABLE_REPRESENTATION") or "")
        if nullable.upper() not in ("", "OPTIONAL", "WRAPPER"):
            raise SerdeError(
                f"{part.upper()}_PROTOBUF_NULLABLE_REPRESENTATION must be OPTIONAL or "
                f"WRAPPER, not {nullable!r}"
            )
        side_pb = protobuf.ProtobufSide(
            columns,
            f"{source.topic}-{part}",
            registry,
            with_registry=fmt == "PROTOBUF",
            nullable=nullable.upper(),
            full_name=_full_schema_name(source, part),
        )
        return _Side(
            names,
            checks,
            side_pb.write,
            side_pb.read,
            nulls_written=True,
            register=side_pb.register if fmt == "PROTOBUF" else None,
        )
    if fmt == "AVRO":
        if not columns:
            return _Side(names, checks, lambda values: None, lambda data: [])
        given = source.property(f"{part.upper()}_SCHEMA_ID")
        side = avro.AvroSide(
            columns,
            unwrapped,
            f"{source.topic}-{part}",
            registry,
            schema_id=None if given is None else int(str(given)),
            full_name=_full_schema_name(source, part),
        )
        return _Side(
            names,
            checks,
            side.write,
            side.read,
            nulls_written=not unwrapped,
            register=side.register,
        )
    for _, t in columns:
        if any(isinstance(x, MapType) and x.key != PrimitiveType("STRING") for x in _walk(t)):
            raise SerdeError("JSON only supports MAP types with STRING keys")
    if fmt == "JSON_SR":
        if not columns:
            return _Side(names, checks, lambda values: None, lambda data: [])
        write, read, register = json_sr.with_header(
            *_json(columns, unwrapped=unwrapped),
            columns,
            unwrapped,
            f"{source.topic}-{part}",
            registry,
        )
        return _Side(names, checks, write, read, nulls_written=not unwrapped, register=register)
    return _Side(names, checks, *_json(columns, unwrapped=unwrapped), nulls_written=not unwrapped)


def _full_schema_name(source: Source, part: str) -> str:
    """The ``fullSchemaName`` of a side's format, from the WITH clause as ksqlDB derives it
    (:func:`headwater.metastore.plan.format_configs`); '' for the format's default name."""
    properties = {name.upper(): value for name, value in source.properties}
    return format_configs(properties, part.upper()).get("fullSchemaName", "")


def _json(columns: tuple[tuple[str, SqlType], ...], unwrapped: bool) -> tuple[Writer, Reader]:
    exact = any(jsonfmt.needs_exact_floats(t) for _, t in columns)
    if unwrapped:
        ((name, sql_type),) = columns
        encode = jsonfmt.encoder(sql_type)
        decode = jsonfmt.decoder(sql_type)

        def write_one(values: Sequence[Any]) -> bytes | None:
            return None if values[0] is None else encode(values[0]).encode("utf-8")

        def read_one(data: bytes) -> list[Any] | None:
            parsed = jsonfmt.loads(data, exact)
            return None if parsed is None else [decode(parsed, name)]

        return write_one, read_one
    encode_object = jsonfmt.object_encoder(tuple((n, jsonfmt.encoder(t)) for n, t in columns))
    read_object = jsonfmt.object_reader(tuple((n, jsonfmt.decoder(t)) for n, t in columns))
    names = tuple(name for name, _ in columns)
    # A DOUBLE column reads a fraction parsed as float and as Decimal alike: a fraction there need
    # not be exact (the workload's price: measured, `bench.profile_queries`, the second parse was
    # half the decoding); every other column's might.
    exact_fields = tuple(n for n, t in columns if t != PrimitiveType("DOUBLE"))
    shape = "STRUCT<" + ", ".join(f"`{n}` {t}" for n, t in columns) + ">"

    def write_object(values: Sequence[Any]) -> bytes | None:
        return encode_object(dict(zip(names, values))).encode("utf-8")

    def read(data: bytes) -> Any:
        parsed = jsonfmt.loads(data, exact, exact_fields)
        if parsed is None:
            return None
        if type(parsed) is not dict:
            raise mismatch("the record", shape, parsed, "expected a JSON object")
        return read_object(parsed, "")

    return write_object, read


def _delimited(columns: tuple[tuple[str, SqlType], ...], delimiter: str) -> tuple[Writer, Reader]:
    printers = tuple(delimited.to_text(t) for _, t in columns)
    parsers = tuple((name, delimited.from_text(t)) for name, t in columns)
    count = len(columns)

    def write(values: Sequence[Any]) -> bytes | None:
        texts = [p(v) for p, v in zip(printers, values)]
        return delimited.write_record(texts, delimiter).encode("utf-8")

    def read(data: bytes) -> list[Any] | None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerdeError(f"not UTF-8 text: {exc}") from None
        if text == "" and count == 1:
            return [None]  # what ksqlDB writes for a single NULL column
        fields = delimited.read_record(text, delimiter)
        if len(fields) != count:
            raise SerdeError(
                f"Column count mismatch on deserialization: expected {count}, got {len(fields)}"
            )
        return [None if f == "" else parse(f, name) for (name, parse), f in zip(parsers, fields)]

    return write, read


def _kafka(columns: tuple[tuple[str, SqlType], ...], part: str) -> tuple[Writer, Reader]:
    for _, t in columns:
        if not (isinstance(t, PrimitiveType) and t.name in _KAFKA_TYPES):
            raise SerdeError(f"The 'KAFKA' format does not support type '{_type_name(t)}'")
    if len(columns) != 1:
        if part == "key" and not columns:
            return (lambda values: None), (lambda data: [])
        raise SerdeError(
            f"The 'KAFKA' format only supports a single field. Got: {_describe_columns(columns)}"
        )
    ((_, sql_type),) = columns
    kind = sql_type.name if isinstance(sql_type, PrimitiveType) else ""
    if kind == "STRING":
        return (
            lambda values: None if values[0] is None else values[0].encode("utf-8"),
            lambda data: [data.decode("utf-8", errors="replace")],  # as Java's new String(b, UTF_8)
        )
    if kind == "BYTES":
        return (lambda values: None if values[0] is None else bytes(values[0])), (
            lambda data: [bytes(data)]
        )
    packer = _KAFKA_STRUCTS[kind]
    size = packer.size
    message = f"Size of data received by {_KAFKA_DESERIALIZER[kind]} is not {size}"

    def write(values: Sequence[Any]) -> bytes | None:
        return None if values[0] is None else packer.pack(values[0])

    def read(data: bytes) -> list[Any] | None:
        if len(data) != size:
            raise SerdeError(f"{message} (got {len(data)} bytes)")
        return list(packer.unpack(data))

    return write, read


_CACHE_SIZE = 1024
_cache: OrderedDict[Source, tuple[Mapping[str, Any] | None, object, RowSerde]] = OrderedDict()
_cache_lock = threading.Lock()
# id(source) -> (source, custom_types, registry, serde); the Source held keeps its id unique
_by_identity: dict[int, tuple[Any, Any, Any, RowSerde]] = {}


def _remember(source: Source, custom_types: Any, registry: Any, serde: RowSerde) -> None:
    """Keep ``serde`` for this very Source object (under ``_cache_lock``)."""
    if len(_by_identity) >= _CACHE_SIZE:
        _by_identity.clear()
    _by_identity[id(source)] = (source, custom_types, registry, serde)


def serde_of(source: Source, custom_types: Mapping[str, Any] | None = None) -> RowSerde:
    """``RowSerde.for_source``, built once per source and reused (building one takes ~30 µs, and
    pull-query routing and INSERT need one per statement).

    A cached serde is reused only with the very ``custom_types`` object it was built with: the
    catalog replaces its types mapping whenever a type changes, so a changed type means a new serde.
    Likewise for the process's schema registry.
    """
    registry = schema_registry.current()
    known = _by_identity.get(id(source))  # no hashing of the whole Source on the hot path
    if (
        known is not None
        and known[0] is source
        and known[1] is custom_types
        and known[2] is registry
    ):
        return known[3]
    with _cache_lock:
        found = _cache.get(source)
        if found is not None and found[0] is custom_types and found[1] is registry:
            _cache.move_to_end(source)
            _remember(source, custom_types, registry, found[2])
            return found[2]
    serde = RowSerde.for_source(source, custom_types, registry)
    with _cache_lock:
        _remember(source, custom_types, registry, serde)
        _cache[source] = (custom_types, registry, serde)
        _cache.move_to_end(source)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return serde
