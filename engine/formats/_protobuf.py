"""The PROTOBUF and PROTOBUF_NOSR formats: protobuf messages built from the columns, as ksqlDB
(Kafka Connect's ProtobufData) writes them.

The message (:func:`proto_schema` gives its ``.proto`` text) is ``ConnectDefault1`` with one field
per column, numbered in column order: BOOLEAN ``bool``, INTEGER ``int32``, BIGINT ``int64``, DOUBLE
``double``, STRING ``string``, BYTES ``bytes``, DECIMAL ``confluent.type.Decimal``, DATE
``google.type.Date``, TIME ``google.type.TimeOfDay``, TIMESTAMP ``google.protobuf.Timestamp``,
ARRAY ``repeated``, MAP ``repeated`` key/value entries, STRUCT a nested message. proto3 has no NULL for scalars: by
default a NULL is written as the type's default (0, "", false) and read back so, as in ksqlDB;
``<part>_PROTOBUF_NULLABLE_REPRESENTATION='OPTIONAL'`` writes ``optional`` fields (a NULL stays
NULL) and ``'WRAPPER'`` the ``google.protobuf`` wrapper messages. Keys are always a message.

PROTOBUF puts Confluent's wire header (a zero byte, the schema id in the registry, the message
indexes) before the message; PROTOBUF_NOSR writes the bare message. Records are read with the
columns' own message (protobuf's field numbers carry the layout).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.message import DecodeError

from headwater.engine.errors import SerdeError
from headwater.engine.formats._avro import fields_reader
from headwater.engine.formats._proto_text import (
    SUPPORT_FILES,
    fill_well_known,
    message_class,
    support_pool,
    to_plain,
    well_known_reader,
)
from headwater.engine.formats.schema_registry import RegisteredSchema, SchemaRegistry
from headwater.sqlparse_ext import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructType,
)

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "BOOLEAN": (_F.TYPE_BOOL, "bool", "BoolValue"),
    "INTEGER": (_F.TYPE_INT32, "int32", "Int32Value"),
    "BIGINT": (_F.TYPE_INT64, "int64", "Int64Value"),
    "DOUBLE": (_F.TYPE_DOUBLE, "double", "DoubleValue"),
    "STRING": (_F.TYPE_STRING, "string", "StringValue"),
    "BYTES": (_F.TYPE_BYTES, "bytes", "BytesValue"),
}
_MESSAGES = {
    "DATE": ".google.type.Date",
    "TIME": ".google.type.TimeOfDay",
    "TIMESTAMP": ".google.protobuf.Timestamp",
}
_HEADER = struct.Struct(">bI")


class _Builder:
    """Builds the message type of some columns and its .proto text."""

    def __init__(self, nullable: str, package: str = "") -> None:
        self.nullable = nullable  # "" (proto3 defaults), "OPTIONAL" or "WRAPPER"
        self.package = package
        self.file = descriptor_pb2.FileDescriptorProto(
            name="ksql.proto",
            syntax="proto3",
            dependency=[f[0] for f in SUPPORT_FILES],
            package=package or None,
        )
        self.count = 0
        self.names: dict[int, str] = {}

    def message(
        self,
        columns: Sequence[tuple[str, SqlType]],
        parent: descriptor_pb2.DescriptorProto | None,
        indent: str,
        name: str = "",
    ) -> tuple[str, list[str]]:
        """(full type name, .proto lines) of a message for ``columns``, named ``name`` or, as
        Connect names a struct without a name, ``ConnectDefault<n>``."""
        if not name:
            self.count += 1
            name = f"ConnectDefault{self.count}"
        proto = (parent.nested_type if parent is not None else self.file.message_type).add(
            name=name
        )
        if parent is not None:
            full = f"{self.names[id(parent)]}.{name}"
        else:
            full = f"{self.package}.{name}" if self.package else name
        self.names[id(proto)] = full
        nested: list[str] = []
        body: list[str] = []
        for number, (column, sql_type) in enumerate(columns, 1):
            field = proto.field.add(name=column, number=number, label=_F.LABEL_OPTIONAL)
            text, inner = self._field(field, sql_type, proto, indent + "  ")
            nested.extend(inner)
            body.append(f"{indent}  {text}")
        blank = [""] if nested else []
        return "." + full, [f"{indent}message {name} {{", *body, *blank, *nested, f"{indent}}}"]

    def _field(
        self,
        field: Any,
        sql_type: SqlType,
        owner: descriptor_pb2.DescriptorProto,
        indent: str,
        in_container: bool = False,
    ) -> tuple[str, list[str]]:
        number, name = field.number, field.name
        if isinstance(sql_type, PrimitiveType) and sql_type.name in _SCALARS:
            kind, text, wrapper = _SCALARS[sql_type.name]
            if self.nullable == "WRAPPER" and not in_container:
                field.type, field.type_name = _F.TYPE_MESSAGE, f".google.protobuf.{wrapper}"
                return f"google.protobuf.{wrapper} {name} = {number};", []
            field.type = kind
            if self.nullable == "OPTIONAL" and not in_container:
                field.proto3_optional = True
                field.oneof_index = len(owner.oneof_decl)
                owner.oneof_decl.add(name=f"_{name}")
                return f"optional {text} {name} = {number};", []
            return f"{text} {name} = {number};", []
        if isinstance(sql_type, DecimalType):
            field.type, field.type_name = _F.TYPE_MESSAGE, ".confluent.type.Decimal"
            return f"confluent.type.Decimal {name} = {number};", []
        if isinstance(sql_type, PrimitiveType) and sql_type.name in _MESSAGES:
            field.type, field.type_name = _F.TYPE_MESSAGE, _MESSAGES[sql_type.name]
            return f"{_MESSAGES[sql_type.name][1:]} {name} = {number};", []
        if isinstance(sql_type, ArrayType):
            if isinstance(sql_type.element, ArrayType | MapType):
                raise SerdeError("The 'PROTOBUF' format does not support nested containers")
            field.label = _F.LABEL_REPEATED
            text, inner = self._field(field, sql_type.element, owner, indent, in_container=True)
            return f"repeated {text}", inner
        if isinstance(sql_type, MapType):
            if sql_type.key != PrimitiveType("STRING"):
                raise SerdeError("PROTOBUF format only supports MAP types with STRING keys")
            entry = owner.nested_type.add(name=f"{name.title().replace('_', '')}Entry")
            entry.options.map_entry = True
            self.names[id(entry)] = f"{self.names[id(owner)]}.{entry.name}"
            key = entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL)
            value = entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL)
            key_text, _ = self._field(key, sql_type.key, entry, indent, in_container=True)
            value_text, inner = self._field(value, sql_type.value, entry, indent, in_container=True)
            field.label, field.type = _F.LABEL_REPEATED, _F.TYPE_MESSAGE
            field.type_name = f".{self.names[id(entry)]}"
            # Connect writes a map as repeated key/value entries (the same bytes as map<K, V>)
            self.count += 1
            shown = f"ConnectDefault{self.count}Entry"
            lines = [
                f"{indent}message {shown} {{",
                f"{indent}  {key_text}",
                f"{indent}  {value_text}",
                *inner,
                f"{indent}}}",
            ]
            return f"repeated {shown} {name} = {number};", lines
        if isinstance(sql_type, StructType):
            nested, lines = self.message(
                tuple((f.name, f.type) for f in sql_type.fields), owner, indent
            )
            field.type, field.type_name = _F.TYPE_MESSAGE, nested
            return f"{nested.rsplit('.', 1)[1]} {name} = {number};", lines
        raise SerdeError(f"The 'PROTOBUF' format does not support type '{sql_type}'")


def proto_schema(
    columns: Sequence[tuple[str, SqlType]], nullable: str = "", full_name: str = ""
) -> tuple[str, Any]:
    """The ``.proto`` text ksqlDB registers for these columns, and the message class.

    ``full_name`` (the side's ``*_SCHEMA_FULL_NAME``) names the message and its package, as
    ksqlDB's ProtobufSchemaTranslator names it (``a.b.Value``: ``package a.b;`` and ``message
    Value``); one that starts with ``ConnectDefault`` is ignored, as ksqlDB ignores it.
    """
    full_name = full_name.strip()
    if full_name.startswith("ConnectDefault"):
        full_name = ""
    package, _, name = full_name.rpartition(".")
    builder = _Builder(nullable, package)
    full, lines = builder.message(columns, None, "", name)
    pool = support_pool()
    try:
        pool.Add(builder.file)
    except (TypeError, ValueError) as exc:  # a column name protobuf does not allow, say
        raise SerdeError(f"The 'PROTOBUF' format cannot hold these columns: {exc}") from None
    descriptor = pool.FindMessageTypeByName(full[1:])
    body = "\n".join(lines)
    imports = "".join(
        f'import "{f[0]}";\n' for f in SUPPORT_FILES if any(f"{f[1]}.{m} " in body for m in f[2])
    )
    head = f"package {package};\n" if package else ""
    text = 'syntax = "proto3";\n' + head + "\n" + (imports + "\n" if imports else "") + body + "\n"
    return text, message_factory.GetMessageClass(descriptor)


# -- values to and from messages -------------------------------------------------------------------


def _setter(sql_type: SqlType, nullable: str) -> Callable[[Any, str, Any], None]:
    """Sets field ``name`` of message ``msg`` to a value of ``sql_type`` (None: left unset)."""
    if isinstance(sql_type, PrimitiveType) and sql_type.name in _SCALARS:
        if nullable == "WRAPPER":

            def set_wrapped(msg: Any, name: str, value: Any) -> None:
                if value is not None:
                    getattr(msg, name).value = value

            return set_wrapped

        def set_scalar(msg: Any, name: str, value: Any) -> None:
            if value is not None:
                setattr(msg, name, value)

        return set_scalar
    if isinstance(sql_type, ArrayType):
        element = sql_type.element
        if isinstance(element, PrimitiveType) and element.name in _SCALARS:

            def set_repeated(msg: Any, name: str, value: Any) -> None:
                if value is not None:
                    default = _SCALAR_DEFAULTS[element.name]
                    getattr(msg, name).extend(default if v is None else v for v in value)

            return set_repeated
        into = _to_message(element)

        def set_messages(msg: Any, name: str, value: Any) -> None:
            if value is not None:
                field = getattr(msg, name)
                for v in value:
                    added = field.add()
                    if v is not None:
                        into(added, v)

        return set_messages
    if isinstance(sql_type, MapType):
        value_type = sql_type.value
        if isinstance(value_type, PrimitiveType) and value_type.name in _SCALARS:
            default = _SCALAR_DEFAULTS[value_type.name]

            def set_scalar_map(msg: Any, name: str, value: Any) -> None:
                if value is not None:
                    field = getattr(msg, name)
                    for k, v in value.items():
                        field[k] = default if v is None else v

            return set_scalar_map
        into_value = _to_message(value_type)

        def set_message_map(msg: Any, name: str, value: Any) -> None:
            if value is not None:
                field = getattr(msg, name)
                for k, v in value.items():
                    entry = field[k]  # present even when NULL: an empty message
                    if v is not None:
                        into_value(entry, v)

        return set_message_map
    convert = _to_message(sql_type)

    def set_message(msg: Any, name: str, value: Any) -> None:
        if value is not None:
            convert(getattr(msg, name), value)

    return set_message


_SCALAR_DEFAULTS = {
    "BOOLEAN": False,
    "INTEGER": 0,
    "BIGINT": 0,
    "DOUBLE": 0.0,
    "STRING": "",
    "BYTES": b"",
}


def _to_message(sql_type: SqlType) -> Callable[[Any, Any], object]:
    """Fills a sub-message from a value of ``sql_type`` (not None)."""
    if isinstance(sql_type, DecimalType):
        precision, scale = sql_type.precision, sql_type.scale
        return lambda msg, value: fill_well_known(
            msg, "confluent.type.Decimal", value, precision=precision, scale=scale
        )
    if isinstance(sql_type, PrimitiveType) and sql_type.name in _MESSAGES:
        name = _MESSAGES[sql_type.name][1:]
        return lambda msg, value: fill_well_known(msg, name, value)
    if isinstance(sql_type, StructType):
        setters = tuple((f.name, _setter(f.type, "")) for f in sql_type.fields)

        def fill_struct(msg: Any, value: dict[str, Any]) -> None:
            msg.SetInParent()
            for name, set_field in setters:
                set_field(msg, name, value.get(name))

        return fill_struct
    raise SerdeError(f"The 'PROTOBUF' format does not support type '{sql_type}'")


def _getter(sql_type: SqlType, nullable: str) -> Callable[[Any, str], Any]:
    """Reads field ``name`` of ``msg`` as a value of ``sql_type``."""
    if isinstance(sql_type, PrimitiveType) and sql_type.name in _SCALARS:
        if nullable == "WRAPPER":
            return lambda msg, name: getattr(msg, name).value if msg.HasField(name) else None
        if nullable == "OPTIONAL":
            return lambda msg, name: getattr(msg, name) if msg.HasField(name) else None
        return getattr
    if isinstance(sql_type, ArrayType):
        element = sql_type.element
        if isinstance(element, PrimitiveType) and element.name in _SCALARS:
            return lambda msg, name: list(getattr(msg, name))
        read = _from_message(element)
        return lambda msg, name: [read(m) for m in getattr(msg, name)]
    if isinstance(sql_type, MapType):
        value_type = sql_type.value
        if isinstance(value_type, PrimitiveType) and value_type.name in _SCALARS:
            return lambda msg, name: dict(getattr(msg, name))
        read_value = _from_message(value_type)
        return lambda msg, name: {k: read_value(v) for k, v in getattr(msg, name).items()}
    read = _from_message(sql_type)
    return lambda msg, name: read(getattr(msg, name)) if msg.HasField(name) else None


def _from_message(sql_type: SqlType) -> Callable[[Any], Any]:
    if isinstance(sql_type, DecimalType):
        read = well_known_reader("confluent.type.Decimal")
        quantum = Decimal(1).scaleb(-sql_type.scale)
        return lambda msg: read(msg).quantize(quantum)  # type: ignore[misc]
    if isinstance(sql_type, PrimitiveType) and sql_type.name in _MESSAGES:
        found = well_known_reader(_MESSAGES[sql_type.name][1:])
        assert found is not None
        return found
    if isinstance(sql_type, StructType):
        getters = tuple((f.name, _getter(f.type, "")) for f in sql_type.fields)
        return lambda msg: {name: get(msg, name) for name, get in getters}
    raise SerdeError(f"The 'PROTOBUF' format does not support type '{sql_type}'")


# -- the format ------------------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise SerdeError("truncated message indexes")
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zig-zag
        shift += 7


class ProtobufSide:
    """The writer and reader of one side (key or value) of a source in PROTOBUF(_NOSR)."""

    def __init__(
        self,
        columns: Sequence[tuple[str, SqlType]],
        subject: str,
        registry: SchemaRegistry | None,
        with_registry: bool,
        nullable: str = "",
        full_name: str = "",
    ) -> None:
        self.columns = tuple(columns)
        self.subject = subject
        self._registry = registry
        self._with_registry = with_registry
        self.text, self._message = proto_schema(self.columns, nullable, full_name)
        self._setters = tuple((name, _setter(t, nullable)) for name, t in self.columns)
        self._getters = tuple((name, _getter(t, nullable)) for name, t in self.columns)
        self._id: int | None = None
        self._writers: dict[tuple[int, tuple[int, ...]], Any] = {}
        self._by_name = fields_reader(self.columns)

    def write(self, values: Sequence[Any]) -> bytes | None:
        msg = self._message()
        try:
            for (name, set_field), value in zip(self._setters, values):
                set_field(msg, name, value)
        except (TypeError, ValueError) as exc:
            raise SerdeError(f"cannot write PROTOBUF: {exc}") from None
        # deterministic: map entries in key order, not in the order this process's string hashes
        # give (they differ between processes, so a Spark worker and a replayed batch would write
        # other bytes for the same row: found by the QTT runner's Spark replay)
        payload: bytes = msg.SerializeToString(deterministic=True)
        if not self._with_registry:
            return payload
        self.register()
        assert self._id is not None
        return _HEADER.pack(0, self._id) + b"\x00" + payload  # message indexes: [0]

    def register(self) -> None:
        """Registers the side's schema (once)."""
        if self._id is None:
            if self._registry is None:
                raise SerdeError(
                    f"the PROTOBUF format needs a schema registry: set "
                    f"'ksql.schema.registry.url' (subject {self.subject})"
                )
            self._id = self._registry.register(
                self.subject, RegisteredSchema("PROTOBUF", self.text)
            )

    def read(self, data: bytes) -> list[Any] | None:
        if self._with_registry:
            if len(data) < 6 or data[0] != 0:
                raise SerdeError("Unknown magic byte!")
            schema_id = _HEADER.unpack_from(data)[1]
            count, pos = _varint(data, 5)
            path = []
            for _ in range(count):
                index, pos = _varint(data, pos)
                path.append(index)
            if schema_id != self._id:  # another writer's schema: read by field names
                return self._read_with(schema_id, tuple(path) or (0,), data[pos:])
            data = data[pos:]
        msg = self._message()
        try:
            msg.ParseFromString(data)
        except DecodeError as exc:
            raise SerdeError(f"not a PROTOBUF message of these columns: {exc}") from None
        return [get(msg, name) for name, get in self._getters]

    def _read_with(self, schema_id: int, path: tuple[int, ...], payload: bytes) -> list[Any]:
        """A record of a schema the registry holds: decoded with it, its fields matched to the
        columns by name (exactly, else ignoring case), as the AVRO format reads."""
        key = (schema_id, path)
        reader = self._writers.get(key)
        if reader is None:
            if self._registry is None:
                raise SerdeError(
                    f"the PROTOBUF format needs a schema registry: set "
                    f"'ksql.schema.registry.url' (subject {self.subject})"
                )
            registered = self._registry.schema(schema_id)
            if registered.kind != "PROTOBUF":
                raise SerdeError(f"schema {schema_id} is {registered.kind}, not PROTOBUF")
            reader = self._writers[key] = message_class(registered.text, index=path)
        msg = reader()
        try:
            msg.ParseFromString(payload)
        except DecodeError as exc:
            raise SerdeError(f"not a PROTOBUF message of schema {schema_id}: {exc}") from None
        return self._by_name(to_plain(msg), "")
