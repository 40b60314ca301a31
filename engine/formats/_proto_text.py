"""``.proto`` text (as a schema registry holds it) to protobuf message classes, and messages to
plain values. Parsing is proto-schema-parser's; this module builds descriptors from its tree.

Well-known messages read as the values they stand for: ``google.protobuf.Timestamp`` as epoch
milliseconds, ``google.type.Date`` as days, ``google.type.TimeOfDay`` as milliseconds of the day,
``confluent.type.Decimal`` as a Decimal, the ``google.protobuf`` wrappers as their value; enums
as their names. Imports other than those (schema references) are not supported. The well-known
messages are defined here (`SUPPORT_FILES`, `support_pool`), for the messages `_protobuf` builds too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor

from headwater.engine.errors import SerdeError

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "sint32": _F.TYPE_SINT32,
    "sint64": _F.TYPE_SINT64,
    "fixed32": _F.TYPE_FIXED32,
    "fixed64": _F.TYPE_FIXED64,
    "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
_EPOCH = date(1970, 1, 1)
_WRAPPERS = {
    "BoolValue": _F.TYPE_BOOL,
    "Int32Value": _F.TYPE_INT32,
    "Int64Value": _F.TYPE_INT64,
    "DoubleValue": _F.TYPE_DOUBLE,
    "StringValue": _F.TYPE_STRING,
    "BytesValue": _F.TYPE_BYTES,
}

#: The well-known messages the columns' messages use, defined here (wire-compatible).
SUPPORT_FILES = (
    (
        "google/protobuf/timestamp.proto",
        "google.protobuf",
        {"Timestamp": [("seconds", _F.TYPE_INT64), ("nanos", _F.TYPE_INT32)]},
    ),
    (
        "google/protobuf/wrappers.proto",
        "google.protobuf",
        {name: [("value", kind)] for name, kind in _WRAPPERS.items()},
    ),
    (
        "google/type/date.proto",
        "google.type",
        {"Date": [("year", _F.TYPE_INT32), ("month", _F.TYPE_INT32), ("day", _F.TYPE_INT32)]},
    ),
    (
        "google/type/timeofday.proto",
        "google.type",
        {
            "TimeOfDay": [
                ("hours", _F.TYPE_INT32),
                ("minutes", _F.TYPE_INT32),
                ("seconds", _F.TYPE_INT32),
                ("nanos", _F.TYPE_INT32),
            ]
        },
    ),
    (
        "confluent/type/decimal.proto",
        "confluent.type",
        {
            "Decimal": [
                ("value", _F.TYPE_BYTES),
                ("precision", _F.TYPE_UINT32),
                ("scale", _F.TYPE_INT32),
            ]
        },
    ),
)


def support_pool() -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding the well-known messages the columns' messages use."""
    pool = descriptor_pool.DescriptorPool()
    for name, package, messages in SUPPORT_FILES:
        file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
        for message, fields in messages.items():
            added = file.message_type.add(name=message)
            for number, (field, kind) in enumerate(fields, 1):
                added.field.add(name=field, number=number, type=kind, label=_F.LABEL_OPTIONAL)
        pool.Add(file)
    return pool


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The file descriptor of ``.proto`` text.

    Raises:
        SerdeError: If the text does not parse, or imports a file this module does not know.
    """
    from proto_schema_parser import ast as past
    from proto_schema_parser.parser import Parser

    try:
        tree = Parser().parse(text)
    except Exception as exc:  # noqa: BLE001 - the parser raises several kinds
        raise SerdeError(f"not a .proto schema: {exc}") from None
    file = descriptor_pb2.FileDescriptorProto(
        name="registered.proto", syntax=tree.syntax or "proto2"
    )
    for element in tree.file_elements:
        if isinstance(element, past.Import):
            if element.name not in {f[0] for f in SUPPORT_FILES}:
                raise SerdeError(
                    f"schema references are not supported yet: import {element.name!r}"
                )
            file.dependency.append(element.name)
        elif isinstance(element, past.Package):
            file.package = element.name
        elif isinstance(element, past.Message):
            _message(file.message_type.add(), element, file.syntax == "proto3")
        elif isinstance(element, past.Enum):
            _enum(file.enum_type.add(), element)
    return file


def _enum(proto: descriptor_pb2.EnumDescriptorProto, element: Any) -> None:
    from proto_schema_parser import ast as past

    proto.name = element.name
    for value in element.elements:
        if isinstance(value, past.EnumValue):
            proto.value.add(name=value.name, number=value.number)


def _message(proto: descriptor_pb2.DescriptorProto, element: Any, proto3: bool) -> None:
    from proto_schema_parser import ast as past

    proto.name = element.name
    fields: list[tuple[Any, int | None]] = []
    for item in element.elements:
        if isinstance(item, past.Field | past.MapField):
            fields.append((item, None))
        elif isinstance(item, past.OneOf):
            index = len(proto.oneof_decl)
            proto.oneof_decl.add(name=item.name)
            fields.extend((f, index) for f in item.elements if isinstance(f, past.Field))
        elif isinstance(item, past.Message):
            _message(proto.nested_type.add(), item, proto3)
        elif isinstance(item, past.Enum):
            _enum(proto.enum_type.add(), item)
    for item, oneof in fields:
        field = proto.field.add(name=item.name, number=item.number, label=_F.LABEL_OPTIONAL)
        if oneof is not None:
            field.oneof_index = oneof
        if isinstance(item, past.MapField):
            entry = proto.nested_type.add(name=f"{_camel(item.name)}Entry")
            entry.options.map_entry = True
            for number, type_name in ((1, item.key_type), (2, item.value_type)):
                _typed(
                    entry.field.add(
                        name="key" if number == 1 else "value",
                        number=number,
                        label=_F.LABEL_OPTIONAL,
                    ),
                    type_name,
                )
            field.label, field.type_name = _F.LABEL_REPEATED, f"{proto.name}.{entry.name}"
            field.type = _F.TYPE_MESSAGE
            continue
        _typed(field, item.type)
        cardinality = str(getattr(item.cardinality, "value", item.cardinality) or "")
        if cardinality == "REPEATED":
            field.label = _F.LABEL_REPEATED
        elif cardinality == "OPTIONAL" and proto3 and oneof is None:
            field.proto3_optional = True
            field.oneof_index = len(proto.oneof_decl)
            proto.oneof_decl.add(name=f"_{item.name}")


def _typed(field: descriptor_pb2.FieldDescriptorProto, type_name: str) -> None:
    scalar = _SCALARS.get(type_name)
    if scalar is not None:
        field.type = scalar
    else:
        field.type_name = type_name  # a message or enum, resolved by the pool in scope


def message_class(text: str, full_name: str | None = None, index: tuple[int, ...] = (0,)) -> Any:
    """The message class of the schema: ``full_name``, else the message at the message-index path
    (Confluent's: ``(0,)`` is the file's first message).

    Raises:
        SerdeError: If the text does not parse or build, or has no such message.
    """
    file = parse_proto(text)
    pool = support_pool()
    try:
        built = pool.Add(file)
    except (TypeError, ValueError, KeyError) as exc:
        raise SerdeError(f"the .proto schema does not build: {exc}") from None
    found = pool.FindFileByName(file.name) if built is None else built
    if full_name:
        try:
            descriptor = pool.FindMessageTypeByName(full_name)
        except KeyError:
            raise SerdeError(f"no message {full_name} in the schema") from None
    else:
        messages = list(found.message_types_by_name.values())
        try:
            descriptor = messages[index[0]]
            for step in index[1:]:
                descriptor = descriptor.nested_types[step]
        except IndexError:
            raise SerdeError(f"no message at index {list(index)} in the schema") from None
    return message_factory.GetMessageClass(descriptor)


def message_index(descriptor: Any) -> tuple[int, ...]:
    """Confluent's message-index path of a message in its file: the inverse of
    :func:`message_class`'s ``index`` (``(0,)`` the file's first message, ``(1, 0)`` the first
    message nested in the second)."""
    path: list[int] = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name.values()).index(descriptor))
    return tuple(reversed(path))


def _zigzag_varint(value: int) -> bytes:
    number = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def index_bytes(path: tuple[int, ...]) -> bytes:
    """A message-index path as Confluent's wire format writes it after the schema id: ``0`` for
    the first message, else the count and each index (zig-zag varints)."""
    if path == (0,):
        return b"\x00"
    return _zigzag_varint(len(path)) + b"".join(_zigzag_varint(i) for i in path)


# -- messages to plain values ------------------------------------------------------------------------


def well_known_reader(name: str) -> Callable[[Any], Any] | None:
    """The plain value of a well-known message (see the module docstring) by its full name
    (``google.protobuf.Timestamp``); None for any other message."""
    if name == "google.protobuf.Timestamp":
        return lambda m: m.seconds * 1000 + m.nanos // 1_000_000
    if name == "google.type.Date":
        return lambda m: (date(m.year, m.month, m.day) - _EPOCH).days
    if name == "google.type.TimeOfDay":
        return lambda m: ((m.hours * 60 + m.minutes) * 60 + m.seconds) * 1000 + m.nanos // 1_000_000
    if name == "confluent.type.Decimal":
        return lambda m: Decimal(
            int.from_bytes(m.value, "big", signed=True) if m.value else 0
        ).scaleb(-m.scale)
    if name.startswith("google.protobuf.") and name.endswith("Value"):
        return lambda m: m.value
    return None


def fill_well_known(
    msg: Any, name: str, value: Any, *, precision: int | None = None, scale: int | None = None
) -> bool:
    """Fills a Timestamp, Date, TimeOfDay or Decimal message (``name`` its full name) from its
    plain value; whether ``name`` is one of them. A Decimal takes ``scale`` (default: the
    value's own) and ``precision`` (default: unset)."""
    if name == "google.protobuf.Timestamp":
        msg.seconds, millis = divmod(int(value), 1000)
        msg.nanos = millis * 1_000_000
    elif name == "google.type.Date":
        day = date.fromordinal(_EPOCH.toordinal() + int(value))
        msg.year, msg.month, msg.day = day.year, day.month, day.day
    elif name == "google.type.TimeOfDay":
        seconds, millis = divmod(int(value), 1000)
        msg.hours, rest = divmod(seconds, 3600)
        msg.minutes, msg.seconds = divmod(rest, 60)
        msg.nanos = millis * 1_000_000
    elif name == "confluent.type.Decimal":
        number = Decimal(str(value)) if not isinstance(value, Decimal) else value
        if scale is None:
            scale = max(0, -int(number.as_tuple().exponent))
        unscaled = int(number.scaleb(scale).to_integral_value())
        msg.value = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        msg.scale = scale
        if precision is not None:
            msg.precision = precision
    else:
        return False
    return True


def to_plain(msg: Any) -> dict[str, Any]:
    """A message as a dict of field name -> plain value (see the module docstring); an unset
    message field, or an unset proto3 ``optional`` scalar, is None."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _single(value_field, v, True) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_single(field, v, True) for v in value]
        elif field.message_type is not None or field.has_presence:
            out[field.name] = _single(field, value, msg.HasField(field.name))
        else:
            out[field.name] = _single(field, value, True)
    return out


def _single(field: FieldDescriptor, value: Any, present: bool) -> Any:
    if not present:
        return None
    if field.message_type is not None:
        convert = well_known_reader(field.message_type.full_name)
        return convert(value) if convert is not None else to_plain(value)
    if field.enum_type is not None:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return value


# -- inference --------------------------------------------------------------------------------------


_SQL = {
    FieldDescriptor.TYPE_BOOL: "BOOLEAN",
    FieldDescriptor.TYPE_INT32: "INTEGER",
    FieldDescriptor.TYPE_SINT32: "INTEGER",
    FieldDescriptor.TYPE_SFIXED32: "INTEGER",
    FieldDescriptor.TYPE_UINT32: "BIGINT",
    FieldDescriptor.TYPE_FIXED32: "BIGINT",
    FieldDescriptor.TYPE_INT64: "BIGINT",
    FieldDescriptor.TYPE_SINT64: "BIGINT",
    FieldDescriptor.TYPE_SFIXED64: "BIGINT",
    FieldDescriptor.TYPE_UINT64: "BIGINT",
    FieldDescriptor.TYPE_FIXED64: "BIGINT",
    FieldDescriptor.TYPE_FLOAT: "DOUBLE",
    FieldDescriptor.TYPE_DOUBLE: "DOUBLE",
    FieldDescriptor.TYPE_STRING: "STRING",
    FieldDescriptor.TYPE_BYTES: "BYTES",
    FieldDescriptor.TYPE_ENUM: "STRING",
}
_WRAPPED = {
    "BoolValue": "BOOLEAN",
    "Int32Value": "INTEGER",
    "UInt32Value": "BIGINT",
    "Int64Value": "BIGINT",
    "UInt64Value": "BIGINT",
    "FloatValue": "DOUBLE",
    "DoubleValue": "DOUBLE",
    "StringValue": "STRING",
    "BytesValue": "BYTES",
}


def _sql_of(field: FieldDescriptor, params: dict[str, str], upper: bool = True) -> str:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return f"MAP<{_one(key, {}, upper)}, {_one(value, {}, upper)}>"
    inner = _one(field, params, upper)
    return f"ARRAY<{inner}>" if field.is_repeated else inner


def _one(field: FieldDescriptor, params: dict[str, str], upper: bool = True) -> str:
    if field.message_type is None:
        return _SQL[field.type]
    name = field.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return "TIMESTAMP"
    if name == "google.type.Date":
        return "DATE"
    if name == "google.type.TimeOfDay":
        return "TIME"
    if name == "confluent.type.Decimal":
        return f"DECIMAL({params.get('precision', '64')}, {params.get('scale', '0')})"
    if name.startswith("google.protobuf.") and name.rsplit(".", 1)[1] in _WRAPPED:
        return _WRAPPED[name.rsplit(".", 1)[1]]
    listed = ", ".join(
        f"`{f.name.upper() if upper else f.name}` {_sql_of(f, {}, upper)}"
        for f in field.message_type.fields
    )
    return f"STRUCT<{listed}>"


def inferred_columns(
    text: str, unwrapped_name: str, full_name: str | None = None, upper: bool = True
) -> tuple[tuple[str, str], ...]:
    """The columns ksqlDB infers from a registered ``.proto`` schema: the message's fields, names
    upper-cased unless ``upper`` is False (a schema named by id keeps its names), DECIMAL's
    precision and scale from Confluent's ``field_meta`` parameters.

    Raises:
        SerdeError: If the schema does not parse, or a field has a type no column can hold.
    """
    del unwrapped_name  # a protobuf value is always a message
    params = _decimal_params(text)
    descriptor = message_class(text, full_name).DESCRIPTOR
    try:
        return tuple(
            (f.name.upper() if upper else f.name, _sql_of(f, params.get(f.name, {}), upper))
            for f in descriptor.fields
        )
    except KeyError as exc:
        raise SerdeError(f"cannot infer a column from the .proto field type {exc}") from None


def _decimal_params(text: str) -> dict[str, dict[str, str]]:
    """field name -> Confluent's ``field_meta`` params (precision, scale) of the top message."""
    from proto_schema_parser import ast as past
    from proto_schema_parser.parser import Parser

    found: dict[str, dict[str, str]] = {}
    try:
        tree = Parser().parse(text)
    except Exception:  # noqa: BLE001 - message_class reports it
        return found

    def walk(elements: list[Any]) -> None:
        for element in elements:
            if isinstance(element, past.Message):
                walk(element.elements)
            elif isinstance(element, past.Field):
                for option in element.options:
                    literal = getattr(option, "value", None)
                    for entry in getattr(literal, "elements", []) or []:
                        if getattr(entry, "name", "") == "params":
                            pairs = {}
                            for param in entry.value or []:
                                items = {e.name: e.value for e in param.elements}
                                pairs[str(items.get("key"))] = str(items.get("value"))
                            found[element.name] = pairs

    walk(tree.file_elements)
    return found


def from_plain(msg: Any, value: dict[str, Any]) -> Any:
    """Fills ``msg`` from a dict of field name (exactly, else ignoring case) -> plain value, the
    inverse of :func:`to_plain`; returns ``msg``."""
    folded = {str(k).upper(): v for k, v in value.items()}
    for field in msg.DESCRIPTOR.fields:
        given = value.get(field.name, folded.get(field.name.upper()))
        if given is None:
            continue
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            target = getattr(msg, field.name)
            value_field = entry.fields_by_name["value"]
            for k, v in given.items():
                if value_field.message_type is None:
                    target[k] = _scalar(value_field, v)
                elif v is not None:
                    _fill(target[k], value_field, v)
        elif field.is_repeated:
            target = getattr(msg, field.name)
            for v in given:
                if field.message_type is None:
                    target.append(_scalar(field, v))
                else:
                    _fill(target.add(), field, v)
        elif field.message_type is not None:
            _fill(getattr(msg, field.name), field, given)
        else:
            setattr(msg, field.name, _scalar(field, given))
    return msg


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.enum_type is not None and isinstance(value, str):
        return field.enum_type.values_by_name[value].number
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return float(value)
    if field.type == FieldDescriptor.TYPE_BYTES and isinstance(value, str):
        import base64

        return base64.b64decode(value)
    return value


def _fill(msg: Any, field: FieldDescriptor, value: Any) -> None:
    name = field.message_type.full_name
    if fill_well_known(msg, name, value):
        return
    if name.startswith("google.protobuf.") and name.endswith("Value"):
        msg.value = _scalar(field.message_type.fields_by_name["value"], value)
    else:
        msg.SetInParent()
        from_plain(msg, value)
