"""Confluent Schema Registry's rules for PROTOBUF schemas. Pure: no I/O.

- :func:`parse`: ``.proto`` text, with the texts of the files it imports (its references, by
  import path), to a :class:`ProtoSchema`. Syntax errors, ``required`` in proto3, imports that are
  neither references nor well-known files, and type names that resolve to nothing are refused.
  The well-known files are always there, as in Confluent's ``KNOWN_DEPENDENCIES``:
  ``google/protobuf/*.proto`` (from protobuf's own descriptors), ``confluent/meta.proto``,
  ``confluent/type/decimal.proto``, ``confluent/type/variant.proto`` and the common
  ``google/type/*.proto`` files.
- :func:`canonical`: the schema printed back as Confluent's ``ProtobufSchemaUtils.toString``
  prints it (``ProtobufSchema.canonicalString``): comments and layout dropped, package and imports
  first, then options, messages, enums, extends and services, indented by two spaces. With
  ``normalize``, as ``ProtobufSchema.normalize`` prints it: type names fully qualified, imports,
  options, fields, oneofs, reserved ranges and enum constants sorted, custom options merged.
- :func:`backward_problems`: Confluent's protobuf ``SchemaDiff`` (``SchemaDiff``,
  ``MessageSchemaDiff``, ``FieldSchemaDiff``, ``EnumSchemaDiff``) of the old schema against the
  new, the differences outside its ``COMPATIBLE_CHANGES`` written as ``Difference.toString``
  writes them. Differences come in Confluent's order, Java's ``HashMap`` iteration order included.

Texts are parsed by proto-schema-parser into its syntax tree and then into this module's
dataclasses, which follow Square Wire's elements (what Confluent parses into). Where this module
departs from Confluent:

- numbers in options are printed from their value, not their token (``0x10`` prints ``16``);
- a ``bytes`` field's default written as a string keeps its quotes (Confluent drops them);
- ``import weak`` is printed (Confluent drops it);
- a list outside a message literal (``option (a).b = [1, 2];``: Wire reads it, protoc refuses
  it) does not parse;
- a type from a reference is compared again when the referenced file's text differs (Confluent
  compares the reference's subject and version: the same thing, for a registry's references);
- descriptions always say the "new" schema reads the "old" one, as a BACKWARD check words them.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from proto_schema_parser import ast as past

from headwater.registry.errors import InvalidSchema

if TYPE_CHECKING:  # compatibility imports this module (its `rules`)
    from headwater.registry.subject import Subject

KIND = "PROTOBUF"

# --- The schema, as Wire's elements hold it --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prim:
    """An option value that is neither a string nor a message nor a list: its ``kind``
    (``BOOLEAN``, ``ENUM`` or ``NUMBER``) and its text."""

    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class Opt:
    """An option: ``value`` is a ``str`` (a string), a :class:`Prim`, a ``dict`` (a message
    literal), a ``list`` or an :class:`Opt` (``(name).sub = value``)."""

    name: str
    value: Any
    parenthesized: bool = False


#: A reserved or extension value: a number, a range (both ends included) or a name.
Reserved = int | tuple[int, int] | str


@dataclass(slots=True)
class Field:
    name: str
    number: int
    type: str  # as written; a map field's is "map<K, V>"
    label: str | None = None  # "optional", "required", "repeated" or None (none written)
    options: list[Opt] = field(default_factory=list)
    default: str | Prim | None = None  # a string literal's value, or the token written
    json_name: str | None = None


@dataclass(slots=True)
class Group:
    name: str
    number: int
    label: str | None
    fields: list[Field]


@dataclass(slots=True)
class OneOf:
    name: str
    fields: list[Field] = field(default_factory=list)
    options: list[Opt] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)


@dataclass(slots=True)
class EnumValue:
    name: str
    number: int
    options: list[Opt] = field(default_factory=list)


@dataclass(slots=True)
class Enum:
    name: str
    values: list[EnumValue] = field(default_factory=list)
    options: list[Opt] = field(default_factory=list)
    reserved: list[list[Reserved]] = field(default_factory=list)


@dataclass(slots=True)
class Extend:
    name: str
    fields: list[Field]


@dataclass(slots=True)
class Extensions:
    values: list[Reserved]
    options: list[Opt]


@dataclass(slots=True)
class Message:
    name: str
    fields: list[Field] = field(default_factory=list)
    oneofs: list[OneOf] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    nested: list[Message | Enum] = field(default_factory=list)
    options: list[Opt] = field(default_factory=list)
    reserved: list[list[Reserved]] = field(default_factory=list)
    extensions: list[Extensions] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)


@dataclass(slots=True)
class Rpc:
    name: str
    request: str
    response: str
    request_stream: bool
    response_stream: bool
    options: list[Opt]


@dataclass(slots=True)
class Service:
    name: str
    options: list[Opt]
    rpcs: list[Rpc]


@dataclass(slots=True)
class ProtoFile:
    syntax: str | None = None
    edition: str | None = None
    package: str | None = None
    imports: list[str] = field(default_factory=list)
    public_imports: list[str] = field(default_factory=list)
    weak_imports: list[str] = field(default_factory=list)
    options: list[Opt] = field(default_factory=list)
    types: list[Message | Enum] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)

    def all_imports(self) -> list[str]:
        return [*self.imports, *self.public_imports, *self.weak_imports]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """A message or enum by its full name: the package of its file, which file (``origin``:
    ``("",)`` for the schema's own, ``("ref", path, text)`` for a reference, ``("known", path)``
    for a well-known file), the element, and whether it is a map's synthetic entry."""

    package: str
    origin: tuple[str, ...]
    type: Message | Enum
    map_entry: bool

    def map_type(self) -> str:
        """``map<K, V>`` of a map entry message."""
        assert isinstance(self.type, Message)
        types = {f.name: f.type for f in self.type.fields}
        return f"map<{types.get('key')}, {types.get('value')}>"


@dataclass(slots=True)
class Space:
    """The types (and extension fields) a schema's names resolve to, by full name (no leading
    dot): the well-known files', its references', its own; ``package`` is its own."""

    package: str
    types: dict[str, TypeInfo] = field(default_factory=dict)
    extends: dict[str, Field] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProtoSchema:
    """A parsed schema: its file, its references' files by import path, its type space.
    Parsed schemas are cached and shared: read them, do not change them."""

    file: ProtoFile
    dependencies: Mapping[str, ProtoFile]
    space: Space


# --- Parsing ---------------------------------------------------------------------------------


def parse(subject: Subject) -> ProtoSchema:
    """The schema of ``subject`` (its references by import path).

    Raises:
        InvalidSchema: the text is not a ``.proto`` file, imports a file that is neither a
            reference nor a well-known file, or names a type that is not defined.
    """
    return _parse(subject.text, tuple(sorted(subject.references.items())))


@lru_cache(maxsize=256)
def _parse(text: str, references: tuple[tuple[str, str], ...]) -> ProtoSchema:
    file = _read(text)
    dependencies = {name: _read(dep, name) for name, dep in references}
    _check_types(file, _visible(file, dependencies))
    return ProtoSchema(file, dependencies, _space(file, references))


@lru_cache(maxsize=512)
def _read(text: str, name: str = "") -> ProtoFile:
    """The file of ``.proto`` text (a reference's when ``name`` is its import path)."""
    from proto_schema_parser.parser import Parser

    where = f" reference '{name}'" if name else ""
    try:
        tree = Parser(setup_lexer=_raise_errors, setup_parser=_raise_errors).parse(text)
        file = _file(tree)
    except _SyntaxError as error:
        raise InvalidSchema(f"Could not parse Protobuf{where} - {error}") from None
    except (ValueError, AttributeError, TypeError, IndexError, RecursionError) as error:
        raise InvalidSchema(f"Could not parse Protobuf{where} - {error}") from None
    if file.syntax == "proto3":
        _check_no_required(file.types, where)
    return file


class _SyntaxError(Exception):
    pass


def _raise_errors(recognizer: Any) -> None:
    """Makes an ANTLR lexer or parser raise at its first error (by default it prints and goes
    on)."""
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_error_listener())


@cache
def _error_listener() -> Any:
    from antlr4.error.ErrorListener import ErrorListener

    class Raise(ErrorListener):  # type: ignore[misc]
        def syntaxError(
            self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
        ) -> None:
            raise _SyntaxError(f"line {line}:{column} {msg}")

    return Raise()


def _check_no_required(types: Sequence[Message | Enum], where: str) -> None:
    for message in types:
        if not isinstance(message, Message):
            continue
        for f in message.fields:
            if f.label == "required":
                raise InvalidSchema(
                    f"Could not parse Protobuf{where} - 'required' label forbidden in proto3 "
                    f"field declarations: field '{f.name}' of message '{message.name}'"
                )
        _check_no_required(message.nested, where)


def _file(tree: past.File) -> ProtoFile:
    file = ProtoFile(syntax=tree.syntax, edition=tree.edition)
    for element in tree.file_elements:
        if isinstance(element, past.Import):
            if element.public:
                file.public_imports.append(element.name)
            elif element.weak:
                file.weak_imports.append(element.name)
            else:
                file.imports.append(element.name)
        elif isinstance(element, past.Package):
            file.package = element.name
        elif isinstance(element, past.Option):
            file.options.append(_option(element))
        elif isinstance(element, (past.Message, past.Enum)):
            file.types.append(_type(element))
        elif isinstance(element, past.Extension):
            file.extends.append(_extend(element))
        elif isinstance(element, past.Service):
            file.services.append(_service(element))
    return file


def _type(element: past.Message | past.Enum) -> Message | Enum:
    return _message(element) if isinstance(element, past.Message) else _enum(element)


def _message(element: past.Message) -> Message:
    message = Message(element.name)
    for child in element.elements:
        if isinstance(child, past.Field):
            message.fields.append(_field(child))
        elif isinstance(child, past.MapField):
            message.fields.append(_map_field(child))
        elif isinstance(child, past.Group):
            message.groups.append(_group(child))
        elif isinstance(child, past.OneOf):
            message.oneofs.append(_oneof(child))
        elif isinstance(child, past.Option):
            message.options.append(_option(child))
        elif isinstance(child, past.Reserved):
            message.reserved.append(_reserved(child.ranges, child.names))
        elif isinstance(child, past.ExtensionRange):
            message.extensions.append(
                Extensions(_reserved(child.ranges, []), [_option(o) for o in child.options])
            )
        elif isinstance(child, (past.Message, past.Enum)):
            message.nested.append(_type(child))
        elif isinstance(child, past.Extension):
            message.extends.append(_extend(child))
    return message


def _field(element: past.Field) -> Field:
    label = element.cardinality.value.lower() if element.cardinality else None
    made = Field(element.name, element.number, _type_name(element.type), label)
    for option in element.options:
        if option.name == "default":
            made.default = _value(option.value)
        elif option.name == "json_name":
            made.json_name = _text(_value(option.value))
        else:
            made.options.append(_option(option))
    return made


def _map_field(element: past.MapField) -> Field:
    key, value = _type_name(element.key_type), _type_name(element.value_type)
    return Field(
        element.name,
        element.number,
        f"map<{key}, {value}>",
        options=[_option(o) for o in element.options],
    )


def _type_name(text: str) -> str:
    return "".join(text.split())


def _group(element: past.Group) -> Group:
    label = element.cardinality.value.lower() if element.cardinality else None
    fields = [_field(f) for f in element.elements if isinstance(f, past.Field)]
    return Group(element.name, element.number, label, fields)


def _oneof(element: past.OneOf) -> OneOf:
    oneof = OneOf(element.name)
    for child in element.elements:
        if isinstance(child, past.Field):
            oneof.fields.append(_field(child))
        elif isinstance(child, past.Group):
            oneof.groups.append(_group(child))
        elif isinstance(child, past.Option):
            oneof.options.append(_option(child))
    return oneof


def _enum(element: past.Enum) -> Enum:
    enum = Enum(element.name)
    for child in element.elements:
        if isinstance(child, past.EnumValue):
            options = [_option(o) for o in child.options]
            enum.values.append(EnumValue(child.name, child.number, options))
        elif isinstance(child, past.Option):
            enum.options.append(_option(child))
        elif isinstance(child, past.EnumReserved):
            enum.reserved.append(_reserved(child.ranges, child.names))
    return enum


def _extend(element: past.Extension) -> Extend:
    fields = [_field(f) for f in element.elements if isinstance(f, past.Field)]
    return Extend(_type_name(element.typeName), fields)


def _service(element: past.Service) -> Service:
    service = Service(element.name, [], [])
    for child in element.elements:
        if isinstance(child, past.Option):
            service.options.append(_option(child))
        elif isinstance(child, past.Method):
            options = [_option(o) for o in child.elements if isinstance(o, past.Option)]
            request, response = child.input_type, child.output_type
            service.rpcs.append(
                Rpc(
                    child.name,
                    _type_name(request.type),
                    _type_name(response.type),
                    request.stream,
                    response.stream,
                    options,
                )
            )
    return service


#: Wire's ``max`` in a reserved or extensions range.
_MAX_TAG = 536_870_911
_RANGE = re.compile(r"^\s*(-?\w+)\s*(?:to\s*(-?\w+))?\s*$")


def _reserved(ranges: Sequence[str], names: Sequence[str]) -> list[Reserved]:
    values: list[Reserved] = []
    for text in ranges:
        match = _RANGE.match(text)
        if match is None:
            raise ValueError(f"bad range '{text}'")
        start, end = match.groups()
        if end is None:
            values.append(_integer(start))
        else:
            values.append((_integer(start), _MAX_TAG if end == "max" else _integer(end)))
    values.extend(names)
    return values


def _integer(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
        return int(text, 8)
    return int(text, 0)


def _option(option: past.Option) -> Opt:
    """Wire's option element: ``(a.b).c.d = v`` is ``a.b`` (parenthesized) holding ``c``
    holding ``d = v``."""
    name, rest, parenthesized = option.name, "", False
    if name.startswith("("):
        close = name.index(")")
        name, rest, parenthesized = name[1:close], name[close + 1 :], True
    value = _value(option.value)
    for sub in reversed([part for part in rest.split(".") if part]):
        value = Opt(sub, value)
    return Opt(name, value, parenthesized)


def _value(value: Any) -> Any:
    if isinstance(value, bool):
        return Prim("BOOLEAN", "true" if value else "false")
    if isinstance(value, (int, float)):
        return Prim("NUMBER", _number_text(value))
    if isinstance(value, past.Identifier):
        return Prim("ENUM", value.name)
    if isinstance(value, str):
        return _unescape(value)
    if isinstance(value, past.MessageLiteral):
        return _literal(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    raise ValueError(f"unexpected option value {value!r}")


def _literal(literal: past.MessageLiteral) -> dict[str, Any]:
    """A message literal as Wire reads it: a repeated key collects its values in a list."""
    found: dict[str, Any] = {}
    for element in literal.elements:
        if not isinstance(element, past.MessageLiteralField):
            continue
        value = _value(element.value)
        if element.name not in found:
            found[element.name] = value
            continue
        previous = found[element.name]
        merged = list(previous) if isinstance(previous, list) else [previous]
        merged.extend(value if isinstance(value, list) else [value])
        found[element.name] = merged
    return found


def _text(value: Any) -> str:
    return value.text if isinstance(value, Prim) else str(value)


def _number_text(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


_ESCAPED = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)"
    r"|([\"'])\s*[\"']",  # the end of one literal and the start of the next: "a" "b"
    re.DOTALL,
)


def _unescape(raw: str) -> str:
    """A string literal's value, from its text between the quotes."""

    def one(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape is None:
            return ""
        if escape[0] in "xuU" and len(escape) > 1:
            return chr(int(escape[1:], 16))
        if escape[0] in "01234567":
            return chr(int(escape, 8))
        return _ESCAPED.get(escape, escape)

    return _ESCAPE.sub(one, raw)


# --- Well-known files ------------------------------------------------------------------------

_GOOGLE_PROTOBUF = (
    "any",
    "api",
    "descriptor",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
)

#: The other files Confluent always knows, trimmed to their types (comments and options gone).
_KNOWN_TEXTS = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
    "confluent/type/variant.proto": """syntax = "proto3";
package confluent.type;
message Variant {
  bytes metadata = 1;
  bytes value = 2;
}
""",
}


_GOOGLE_TYPE = 'syntax = "proto3"; package google.type; '
#: The google/type files Confluent knows (protobuf's Python runtime does not have them), trimmed to
#: their types.
_GOOGLE_TYPE_TEXTS = {
    "google/type/calendar_period.proto": _GOOGLE_TYPE
    + (
        "enum CalendarPeriod { CALENDAR_PERIOD_UNSPECIFIED = 0; DAY = 1; WEEK = 2; FORTNIGHT "
        "= 3; MONTH = 4; QUARTER = 5; HALF = 6; YEAR = 7; }"
    ),
    "google/type/color.proto": _GOOGLE_TYPE
    + (
        'import "google/protobuf/wrappers.proto"; message Color { float red = 1; float green '
        "= 2; float blue = 3; google.protobuf.FloatValue alpha = 4; }"
    ),
    "google/type/date.proto": _GOOGLE_TYPE
    + ("message Date { int32 year = 1; int32 month = 2; int32 day = 3; }"),
    "google/type/datetime.proto": _GOOGLE_TYPE
    + (
        'import "google/protobuf/duration.proto"; message DateTime { int32 year = 1; int32 '
        "month = 2; int32 day = 3; int32 hours = 4; int32 minutes = 5; int32 seconds = 6; "
        "int32 nanos = 7; oneof time_offset { google.protobuf.Duration utc_offset = 8; "
        "TimeZone time_zone = 9; } } message TimeZone { string id = 1; string version = 2; }"
    ),
    "google/type/dayofweek.proto": _GOOGLE_TYPE
    + (
        "enum DayOfWeek { DAY_OF_WEEK_UNSPECIFIED = 0; MONDAY = 1; TUESDAY = 2; WEDNESDAY = "
        "3; THURSDAY = 4; FRIDAY = 5; SATURDAY = 6; SUNDAY = 7; }"
    ),
    "google/type/decimal.proto": _GOOGLE_TYPE + ("message Decimal { string value = 1; }"),
    "google/type/expr.proto": _GOOGLE_TYPE
    + (
        "message Expr { string expression = 1; string title = 2; string description = 3; "
        "string location = 4; }"
    ),
    "google/type/fraction.proto": _GOOGLE_TYPE
    + ("message Fraction { int64 numerator = 1; int64 denominator = 2; }"),
    "google/type/interval.proto": _GOOGLE_TYPE
    + (
        'import "google/protobuf/timestamp.proto"; message Interval { '
        "google.protobuf.Timestamp start_time = 1; google.protobuf.Timestamp end_time = 2; }"
    ),
    "google/type/latlng.proto": _GOOGLE_TYPE
    + ("message LatLng { double latitude = 1; double longitude = 2; }"),
    "google/type/money.proto": _GOOGLE_TYPE
    + ("message Money { string currency_code = 1; int64 units = 2; int32 nanos = 3; }"),
    "google/type/month.proto": _GOOGLE_TYPE
    + (
        "enum Month { MONTH_UNSPECIFIED = 0; JANUARY = 1; FEBRUARY = 2; MARCH = 3; APRIL = 4;"
        " MAY = 5; JUNE = 6; JULY = 7; AUGUST = 8; SEPTEMBER = 9; OCTOBER = 10; NOVEMBER = "
        "11; DECEMBER = 12; }"
    ),
    "google/type/phone_number.proto": _GOOGLE_TYPE
    + (
        "message PhoneNumber { string extension = 3; oneof kind { string e164_number = 1; "
        "ShortCode short_code = 2; } message ShortCode { string region_code = 1; string "
        "number = 2; } }"
    ),
    "google/type/postal_address.proto": _GOOGLE_TYPE
    + (
        "message PostalAddress { int32 revision = 1; string region_code = 2; string "
        "language_code = 3; string postal_code = 4; string sorting_code = 5; string "
        "administrative_area = 6; string locality = 7; string sublocality = 8; repeated "
        "string address_lines = 9; repeated string recipients = 10; string organization = 11;"
        " }"
    ),
    "google/type/quaternion.proto": _GOOGLE_TYPE
    + ("message Quaternion { double x = 1; double y = 2; double z = 3; double w = 4; }"),
    "google/type/timeofday.proto": _GOOGLE_TYPE
    + (
        "message TimeOfDay { int32 hours = 1; int32 minutes = 2; int32 seconds = 3; int32 "
        "nanos = 4; }"
    ),
}


@cache
def _known_files() -> dict[str, ProtoFile]:
    """The well-known files by import path."""
    files = {f"google/protobuf/{name}.proto": _descriptor_file(name) for name in _GOOGLE_PROTOBUF}
    files.update({path: _read(text, path) for path, text in _KNOWN_TEXTS.items()})
    files.update({path: _read(text, path) for path, text in _GOOGLE_TYPE_TEXTS.items()})
    return files


@cache
def _known_space() -> Space:
    space = Space("")
    for path, file in _known_files().items():
        _collect(space, file, ("known", path))
    return space


_SCALAR_OF_TYPE = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    15: "sfixed32",
    16: "sfixed64",
    17: "sint32",
    18: "sint64",
}


def _descriptor_file(name: str) -> ProtoFile:
    """A ``google/protobuf`` file from protobuf's compiled descriptor, as Confluent's
    ``toProtoFile(FileDescriptorProto)`` makes it (its maps are their entry messages)."""
    from google.protobuf import descriptor_pb2

    module = importlib.import_module(f"google.protobuf.{name}_pb2")
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    proto3 = proto.syntax == "proto3"
    file = ProtoFile(syntax=proto.syntax or "proto2", package=proto.package or None)
    file.imports.extend(proto.dependency)
    file.types.extend(_descriptor_message(m, proto3) for m in proto.message_type)
    file.types.extend(_descriptor_enum(e) for e in proto.enum_type)
    return file


def _descriptor_message(proto: Any, proto3: bool) -> Message:
    message = Message(proto.name)
    message.oneofs = [OneOf(o.name) for o in proto.oneof_decl]
    for f in proto.field:
        in_oneof = f.HasField("oneof_index") and not f.proto3_optional
        label = None if in_oneof else _descriptor_label(f, proto3)
        made = Field(f.name, f.number, f.type_name or _SCALAR_OF_TYPE[f.type], label)
        (message.oneofs[f.oneof_index].fields if in_oneof else message.fields).append(made)
    message.nested.extend(_descriptor_message(m, proto3) for m in proto.nested_type)
    message.nested.extend(_descriptor_enum(e) for e in proto.enum_type)
    if proto.options.map_entry:
        message.options.append(Opt("map_entry", Prim("BOOLEAN", "true")))
    return message


def _descriptor_label(proto: Any, proto3: bool) -> str | None:
    if proto.proto3_optional:
        return "optional"
    label = {1: "optional", 2: "required", 3: "repeated"}[proto.label]
    return None if proto3 and label != "repeated" else label


def _descriptor_enum(proto: Any) -> Enum:
    return Enum(proto.name, [EnumValue(v.name, v.number) for v in proto.value])


# --- Names -----------------------------------------------------------------------------------


def _space(file: ProtoFile, references: Sequence[tuple[str, str]]) -> Space:
    """Every type a schema's names may resolve to, as Confluent's diff ``Context`` collects
    them: the well-known files', the references', then the schema's own."""
    known = _known_space()
    space = Space(file.package or "", dict(known.types), dict(known.extends))
    for path, text in references:
        _collect(space, _read(text, path), ("ref", path, text))
    _collect(space, file, ("",))
    return space


def _collect(space: Space, file: ProtoFile, origin: tuple[str, ...]) -> None:
    package = file.package or ""
    prefix = [package] if package else []
    _collect_extends(space, file.extends, prefix)
    _collect_types(space, file.types, prefix, package, origin)


def _collect_types(
    space: Space,
    types: Sequence[Message | Enum],
    prefix: list[str],
    package: str,
    origin: tuple[str, ...],
) -> None:
    for element in types:
        path = [*prefix, element.name]
        map_entry = False
        if isinstance(element, Message):
            _collect_extends(space, element.extends, path)
            map_entry = _has_option(element.options, "map_entry")
        space.types[".".join(path)] = TypeInfo(package, origin, element, map_entry)
        if isinstance(element, Message):
            _collect_types(space, element.nested, path, package, origin)


def _collect_extends(space: Space, extends: Sequence[Extend], prefix: list[str]) -> None:
    for extend in extends:
        for f in extend.fields:
            space.extends[".".join([*prefix, f.name])] = f


def _has_option(options: Sequence[Opt], name: str) -> bool:
    return any(
        o.name == name and isinstance(o.value, Prim) and o.value.text == "true" for o in options
    )


T = TypeVar("T")


def _resolve(table: Mapping[str, T], package: str, scope: Sequence[str], name: str) -> str | None:
    """The full name (no leading dot) ``name`` resolves to from inside ``scope`` (the enclosing
    messages' names) of a file in ``package``, as Confluent's ``Context.resolve`` finds it: a
    leading dot means a full name, else the longest enclosing prefix that makes a known name."""
    if name.startswith("."):
        return name[1:] if name[1:] in table else None
    prefix = [*(package.split(".") if package else []), *scope]
    while prefix:
        candidate = ".".join(prefix) + "." + name
        if candidate in table:
            return candidate
        prefix.pop()
    return name if name in table else None


_SCALARS = frozenset(
    (
        *("bool", "bytes", "double", "float", "fixed32", "fixed64", "int32", "int64"),
        *("sfixed32", "sfixed64", "sint32", "sint64", "string", "uint32", "uint64"),
    )
)


def _is_map(type_name: str) -> bool:
    return type_name.startswith("map<") and type_name.endswith(">")


def _map_parts(type_name: str) -> tuple[str, str]:
    key, _, value = type_name[4:-1].partition(",")
    return key.strip(), value.strip()


def _visible(file: ProtoFile, dependencies: Mapping[str, ProtoFile]) -> Space:
    """The types the schema's own names may use: the well-known files' (imported or not, as
    Confluent resolves them), its own, and those of the references it imports (and they
    import).

    Raises:
        InvalidSchema: an import is neither a reference nor a well-known file.
    """
    visible = Space(file.package or "", dict(_known_space().types))
    _collect(visible, file, ("",))
    seen: set[str] = set()
    pending = list(file.all_imports())
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        imported = dependencies.get(path) or _known_files().get(path)
        if imported is None:
            raise InvalidSchema(
                f"Invalid schema: import '{path}' is neither among the schema's references "
                "nor a well-known file"
            )
        _collect(visible, imported, ("",))
        pending.extend(imported.all_imports())
    return visible


def _check_types(file: ProtoFile, visible: Space) -> None:
    """Raises InvalidSchema for the first type name in ``file`` that resolves to nothing."""
    package = file.package or ""
    for name, scope in _type_uses(file.types, file.extends, []):
        if _resolve(visible.types, package, scope, name) is None:
            raise InvalidSchema(f"Invalid schema: type '{name}' is not defined")
    for service in file.services:
        for rpc in service.rpcs:
            for name in (rpc.request, rpc.response):
                if _resolve(visible.types, package, [], name) is None:
                    raise InvalidSchema(f"Invalid schema: type '{name}' is not defined")


def _type_uses(
    types: Sequence[Message | Enum], extends: Sequence[Extend], scope: list[str]
) -> Iterator[tuple[str, list[str]]]:
    """Every named type used in these elements, with the scope it is used in."""
    for extend in extends:
        yield extend.name, scope
        yield from _field_type_uses(extend.fields, scope)
    for message in types:
        if not isinstance(message, Message):
            continue
        inner = [*scope, message.name]
        fields = [*message.fields, *(f for o in message.oneofs for f in o.fields)]
        fields.extend(f for g in message.groups for f in g.fields)
        yield from _field_type_uses(fields, inner)
        yield from _type_uses(message.nested, message.extends, inner)


def _field_type_uses(fields: Sequence[Field], scope: list[str]) -> Iterator[tuple[str, list[str]]]:
    for f in fields:
        named = _map_parts(f.type)[1] if _is_map(f.type) else f.type
        if named not in _SCALARS:
            yield named, scope


# --- Printing --------------------------------------------------------------------------------


def canonical(subject: Subject, normalize: bool = False) -> str:
    """The schema as Confluent prints it back (``canonicalString``), or normalized
    (``normalize().canonicalString()``).

    Raises:
        InvalidSchema: the text does not parse (when normalizing: as :func:`parse`).
    """
    if normalize:
        schema = parse(subject)
        return _Printer(True, schema.space).file(schema.file)
    return _Printer(False, None).file(_read(subject.text))


def _indent(value: str) -> str:
    """Each line of ``value`` indented by two spaces (Java's ``split("\\n")`` drops trailing
    empty lines)."""
    lines = value.split("\n")
    if len(lines) > 1:
        while lines and not lines[-1]:
            lines.pop()
    return "".join(f"  {line}\n" for line in lines)


_JAVA_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
}


def _quoted(text: str) -> str:
    return '"' + "".join(_JAVA_ESCAPES.get(c, c) for c in text) + '"'


def _value_kind(value: Any) -> str:
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, Prim):
        return value.kind
    if isinstance(value, dict):
        return "MAP"
    if isinstance(value, list):
        return "LIST"
    return "OPTION"


def _normal_number(text: str) -> str:
    """A number as Java's default ``DecimalFormat`` writes it (no grouping, at most three
    decimals, half-even), as normalizing writes numbers; ``inf`` and ``nan`` unchanged."""
    try:
        number = Decimal(_integer(text))
    except ValueError:
        try:
            number = Decimal(text)
        except InvalidOperation:
            return text
    if not number.is_finite():
        return text
    with localcontext() as context:
        context.prec = max(number.adjusted(), 0) + 5
        rounded = number.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
    return format(rounded, "f").rstrip("0").rstrip(".")


def _ranges_sort_key(value: Reserved) -> tuple[int, str]:
    if isinstance(value, tuple):
        return value[0], f"{value[0]}..{value[1]}"
    if isinstance(value, int):
        return value, str(value)
    return 2**31 - 1, value


class _Printer:
    """Confluent's ``ProtobufSchemaUtils.toString`` (and, with ``normalize``, its
    ``toNormalizedString``, which needs the schema's type space to qualify names)."""

    def __init__(self, normalize: bool, space: Space | None) -> None:
        self.normalize = normalize
        self.space = space or Space("")
        self.scope: list[str] = []

    # names

    def _resolve(self, name: str) -> str | None:
        return _resolve(self.space.types, self.space.package, self.scope, name)

    def _qualified(self, name: str) -> str:
        found = self._resolve(name)
        if found is None:
            raise InvalidSchema(f"Invalid schema: could not resolve type: {name}")
        return "." + found

    def _type_info(self, name: str) -> TypeInfo | None:
        found = self._resolve(name)
        return self.space.types.get(found) if found is not None else None

    @contextmanager
    def _entered(self, name: str) -> Iterator[None]:
        self.scope.append(name)
        try:
            yield
        finally:
            self.scope.pop()

    # file

    def file(self, file: ProtoFile) -> str:
        out = self._header(file)
        options = self._options(file.options)
        if options:
            out += "\n" + "".join(self._option_line(o) for o in options)
        types = self._types(file.types)
        if types:
            out += "\n" + "".join(self._type(t, indent=False) for t in types)
        if file.extends:
            out += "\n" + "".join(self._extend(e) for e in self._extends(file.extends))
        if file.services:
            out += "\n" + "".join(self._service(s) for s in file.services)
        return out

    def _header(self, file: ProtoFile) -> str:
        out = ""
        if file.syntax is not None and (not self.normalize or file.syntax == "proto3"):
            out += f'syntax = "{file.syntax}";\n'
        if file.edition is not None:
            out += f'edition = "{file.edition}";\n'
        if file.package is not None:
            out += f"package {file.package};\n"
        if file.all_imports():
            out += "\n"
            for keyword, paths in (
                ("import", file.imports),
                ("import public", file.public_imports),
                ("import weak", file.weak_imports),
            ):
                listed = sorted(set(paths)) if self.normalize else paths
                out += "".join(f'{keyword} "{path}";\n' for path in listed)
        return out

    def _types(self, types: Sequence[Message | Enum]) -> list[Message | Enum]:
        """Messages first, then enums (normalizing drops maps' entry messages)."""
        kept = [
            t
            for t in types
            if not (self.normalize and isinstance(t, Message) and self._is_map_entry(t.name))
        ]
        return [t for t in kept if isinstance(t, Message)] + [
            t for t in kept if isinstance(t, Enum)
        ]

    def _is_map_entry(self, name: str) -> bool:
        info = self._type_info(name)
        return info is not None and info.map_entry

    def _type(self, element: Message | Enum, indent: bool) -> str:
        with self._entered(element.name):
            text = self._message(element) if isinstance(element, Message) else self._enum(element)
        return _indent(text) if indent else text

    # messages

    def _message(self, message: Message) -> str:
        out = f"message {message.name} {{"
        if message.reserved:
            out += "\n" + "".join(_indent(line) for line in self._reserved(message.reserved))
        options = self._options(message.options)
        if options:
            out += "\n" + "".join(_indent(self._option_line(o)) for o in options)
        if message.fields:
            fields = self._by_number(message.fields)
            out += "\n" + "".join(_indent(self._field(f)) for f in fields)
        if message.oneofs:
            out += "\n" + "".join(_indent(self._oneof(o)) for o in self._oneofs(message.oneofs))
        if message.groups:
            out += "\n" + "".join(_indent(self._group(g)) for g in self._by_number(message.groups))
        if message.extensions:
            out += "\n" + "".join(_indent(self._extensions(e)) for e in message.extensions)
        if message.extends:
            extends = self._extends(message.extends)
            out += "\n" + "".join(_indent(self._extend(e)) for e in extends)
        types = self._types(message.nested)
        if types:
            out += "\n" + "".join(self._type(t, indent=True) for t in types)
        return out + "}\n"

    def _by_number(self, items: Sequence[Any]) -> list[Any]:
        return sorted(items, key=lambda item: item.number) if self.normalize else list(items)

    def _oneofs(self, oneofs: Sequence[OneOf]) -> list[OneOf]:
        if not self.normalize:
            return list(oneofs)
        kept = [
            OneOf(o.name, self._by_number(o.fields), o.options, o.groups)
            for o in oneofs
            if o.fields
        ]
        return sorted(kept, key=lambda o: o.fields[0].number)

    def _reserved(self, statements: Sequence[Sequence[Reserved]]) -> list[str]:
        if not self.normalize:
            return [self._reserved_line("reserved", values) for values in statements]
        values = sorted((v for s in statements for v in s), key=_ranges_sort_key)
        return [self._reserved_line("reserved", [v]) for v in values]

    def _reserved_line(self, keyword: str, values: Sequence[Reserved], tail: str = "") -> str:
        return f"{keyword} {', '.join(self._range(v) for v in values)}{tail};\n"

    def _range(self, value: Reserved) -> str:
        if isinstance(value, str):
            return f'"{value}"'
        if isinstance(value, int):
            return str(value)
        start, end = value
        if self.normalize and start == end:
            return str(start)
        return f"{start} to {end if end < _MAX_TAG else 'max'}"

    def _extensions(self, extensions: Extensions) -> str:
        options = self._options(extensions.options)
        tail = " " + self._option_list(options) if options else ""
        if not self.normalize:
            return self._reserved_line("extensions", extensions.values, tail)
        values = sorted(extensions.values, key=lambda v: _ranges_sort_key(v)[0])
        return "".join(self._reserved_line("extensions", [v], tail) for v in values)

    def _oneof(self, oneof: OneOf) -> str:
        out = f"oneof {oneof.name} {{"
        options = self._options(oneof.options)
        if options:
            out += "\n" + "".join(_indent(self._option_line(o)) for o in options)
        if oneof.fields:
            out += "\n" + "".join(_indent(self._field(f)) for f in oneof.fields)
        if oneof.groups:
            out += "\n" + "".join(_indent(self._group(g)) for g in self._by_number(oneof.groups))
        return out + "}\n"

    def _group(self, group: Group) -> str:
        label = f"{group.label} " if group.label else ""
        out = f"{label}group {group.name} = {group.number} {{"
        if group.fields:
            out += "\n" + "".join(_indent(self._field(f)) for f in self._by_number(group.fields))
        return out + "}\n"

    def _field(self, f: Field) -> str:
        type_name, label = self._field_type(f)
        out = f"{label} " if label else ""
        out += f"{type_name} {f.name} = {f.number}"
        options = list(f.options)
        if f.default is not None:
            options.append(Opt("default", self._default(type_name, f.default)))
        if f.json_name is not None:
            options.append(Opt("json_name", f.json_name))
        options = self._options(options)
        if options:
            out += " " + self._option_list(options)
        return out + ";\n"

    def _field_type(self, f: Field) -> tuple[str, str | None]:
        if not self.normalize:
            return f.type, f.label
        type_name, label = f.type, f.label
        if type_name not in _SCALARS and not _is_map(type_name):
            type_name = self._qualified(type_name)
            info = self.space.types.get(type_name[1:])
            if info is not None and info.map_entry:
                type_name = info.map_type()
        if _is_map(type_name):
            key, value = _map_parts(type_name)
            found = self._resolve(value)
            type_name = f"map<{key}, {'.' + found if found else value}>"
            label = None
        return type_name, label

    @staticmethod
    def _default(type_name: str, value: str | Prim) -> Any:
        """A field's default as an option of the kind Confluent gives it from the field's type
        (``toKind``); a ``bytes`` default written as a string keeps its quotes (Confluent drops
        them)."""
        simple = type_name.rsplit(".", 1)[-1]
        text = _text(value)
        if simple == "string" or (simple == "bytes" and isinstance(value, str)):
            return text
        if simple == "bool":
            return Prim("BOOLEAN", text)
        return Prim("NUMBER" if simple in _SCALARS else "ENUM", text)

    # enums

    def _enum(self, enum: Enum) -> str:
        out = f"enum {enum.name} {{"
        if enum.reserved:
            out += "\n" + "".join(_indent(line) for line in self._reserved(enum.reserved))
        elif enum.options or enum.values:
            out += "\n"
        out += "".join(_indent(self._option_line(o)) for o in self._options(enum.options))
        values = enum.values
        if self.normalize:
            values = sorted(values, key=lambda v: (v.number, v.name))
        out += "".join(_indent(self._enum_value(v)) for v in values)
        return out + "}\n"

    def _enum_value(self, value: EnumValue) -> str:
        options = self._options(value.options)
        tail = " " + self._option_list(options) if options else ""
        return f"{value.name} = {value.number}{tail};\n"

    # extends and services

    def _extends(self, extends: Sequence[Extend]) -> list[Extend]:
        if not self.normalize:
            return list(extends)
        grouped: dict[str, list[Field]] = {}
        for extend in extends:
            grouped.setdefault(self._qualified(extend.name), []).extend(extend.fields)
        return [Extend(name, fields) for name, fields in grouped.items()]

    def _extend(self, extend: Extend) -> str:
        out = f"extend {extend.name} {{"
        if extend.fields:
            fields = self._by_number(extend.fields)
            out += "\n" + "".join(_indent(self._field(f)) for f in fields)
        return out + "}\n"

    def _service(self, service: Service) -> str:
        out = f"service {service.name} {{"
        options = self._options(service.options)
        if options:
            out += "\n" + "".join(_indent(self._option_line(o)) for o in options)
        if service.rpcs:
            out += "\n" + "".join(_indent(self._rpc(r)) for r in service.rpcs)
        return out + "}\n"

    def _rpc(self, rpc: Rpc) -> str:
        request, response = rpc.request, rpc.response
        if self.normalize:
            request, response = self._qualified(request), self._qualified(response)
        out = f"rpc {rpc.name} ({'stream ' if rpc.request_stream else ''}{request}) returns ("
        out += f"{'stream ' if rpc.response_stream else ''}{response})"
        options = self._options(rpc.options)
        if options:
            out += " {\n" + "".join(_indent(self._option_line(o)) for o in options) + "}"
        return out + ";\n"

    # options

    def _option_line(self, option: Opt) -> str:
        return f"option {self._option(option)};\n"

    def _option(self, option: Opt) -> str:
        name = f"({option.name})" if option.parenthesized else option.name
        value = option.value
        kind = _value_kind(value)
        if kind == "STRING":
            return f"{name} = {_quoted(value)}"
        if kind in ("BOOLEAN", "ENUM"):
            return f"{name} = {value.text}"
        if kind == "NUMBER":
            return f"{name} = {self._number(value.text)}"
        if kind == "OPTION":
            return f"{name}.{self._option(value)}"
        if kind == "MAP":
            return f"{name} = {{\n{self._option_map(value)}}}"
        return f"{name} = {self._option_list(value)}"

    def _number(self, text: str) -> str:
        return _normal_number(text) if self.normalize else text

    def _option_list(self, values: Sequence[Any]) -> str:
        if len(values) == 1:
            return f"[{self._option_value(values[0])}]"
        last = len(values) - 1
        lines = (
            _indent(self._option_value(v) + ("," if i < last else "")) for i, v in enumerate(values)
        )
        return "[\n" + "".join(lines) + "]"

    def _option_map(self, values: Mapping[str, Any]) -> str:
        entries = list(values.items())
        if self.normalize:
            entries = self._normal_entries(entries)
        last = len(entries) - 1
        return "".join(
            _indent(f"{key}: {self._option_value(value)}{',' if i < last else ''}")
            for i, (key, value) in enumerate(entries)
        )

    def _normal_entries(self, entries: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Empty lists dropped, extension keys qualified, sorted by key (the first of equal
        keys kept)."""
        kept: dict[str, Any] = {}
        for key, value in entries:
            if isinstance(value, list) and not value:
                continue
            if key.startswith("[") and key.endswith("]"):
                found = self._resolve_extend(key[1:-1])
                key = f"[{found}]" if found is not None else key
            kept.setdefault(key, value)
        return sorted(kept.items())

    def _option_value(self, value: Any) -> str:
        if isinstance(value, str):
            return _quoted(value)
        if isinstance(value, dict):
            return "{\n" + self._option_map(value) + "}"
        if isinstance(value, list):
            if self.normalize and len(value) == 1:
                return self._option_value(value[0])
            last = len(value) - 1
            lines = (
                _indent(self._option_value(v) + ("," if i < last else ""))
                for i, v in enumerate(value)
            )
            return "[\n" + "".join(lines) + "]"
        if isinstance(value, Prim):
            return self._number(value.text) if value.kind == "NUMBER" else value.text
        if isinstance(value, Opt):
            return self._option(value)
        return str(value)

    # normalizing options (Confluent's FormatContext.filterOptions)

    def _resolve_extend(self, name: str) -> str | None:
        return _resolve(self.space.extends, self.space.package, self.scope, name)

    def _options(self, options: Sequence[Opt]) -> list[Opt]:
        """The options as printed: normalizing qualifies custom options' names, turns
        ``(a).b = v`` into ``(a) = {b: v}``, sorts them by name and merges the values of a
        custom option that is not repeated."""
        if not self.normalize or not options:
            return list(options)
        named = sorted((self._qualify_option(o) for o in options), key=lambda o: o.name)
        grouped: dict[str, list[Opt]] = {}
        for option in named:
            grouped.setdefault(option.name, []).append(option)
        out: list[Opt] = []
        for name, group in grouped.items():
            extension = self.space.extends.get(name.removeprefix("."))
            if extension is None or extension.label == "repeated":
                out.extend(group)
                continue
            merged = group[0]
            for option in group[1:]:
                merged = self._merge_option(extension, merged, option)
            out.append(merged)
        return out

    def _qualify_option(self, option: Opt) -> Opt:
        if not option.parenthesized:
            return option
        found = self._resolve_extend(option.name)
        if found is None:
            return option
        return _as_map(Opt(found, option.value, True))

    def _merge_option(self, extension: Field, existing: Opt, replacement: Opt) -> Opt:
        replacement = _as_map(replacement)
        if isinstance(existing.value, dict) and isinstance(replacement.value, dict):
            merged = self._merge_maps(extension, existing.value, replacement.value)
            return Opt(replacement.name, merged, replacement.parenthesized)
        return replacement

    def _merge_maps(
        self, container: Field, existing: Mapping[str, Any], replacement: Mapping[str, Any]
    ) -> dict[str, Any]:
        message = self._message_of(container)
        merged = dict(existing)
        for key, value in replacement.items():
            if key not in merged:
                merged[key] = value
                continue
            nested = _find_field(message, key) if message is not None else None
            merged[key] = self._merge_values(nested, merged[key], value)
        return merged

    def _merge_values(self, f: Field | None, first: Any, second: Any) -> Any:
        singular = f is not None and f.label != "repeated"
        if singular and isinstance(first, dict) and isinstance(second, dict):
            assert f is not None
            if self._message_of(f) is not None:
                return self._merge_maps(f, first, second)
        if singular:
            return second
        values: list[Any] = []
        for value in [
            *(first if isinstance(first, list) else [first]),
            *(second if isinstance(second, list) else [second]),
        ]:
            if value not in values:
                values.append(value)
        return values

    def _message_of(self, f: Field) -> Message | None:
        info = self._type_info(f.type)
        return info.type if info is not None and isinstance(info.type, Message) else None


def _as_map(option: Opt) -> Opt:
    """``(a).b.c = v`` as ``(a) = {b: {c: v}}`` (Confluent's ``transform``)."""
    if not isinstance(option.value, Opt):
        return option
    return Opt(option.name, _option_as_map(option.value), option.parenthesized)


def _option_as_map(inner: Opt) -> dict[str, Any]:
    value = _option_as_map(inner.value) if isinstance(inner.value, Opt) else inner.value
    return {inner.name: value}


def _find_field(message: Message, name: str) -> Field | None:
    for f in [*message.fields, *(f for o in message.oneofs for f in o.fields)]:
        if f.name == name:
            return f
    return None


# --- The diff --------------------------------------------------------------------------------

#: Confluent's ``SchemaDiff.COMPATIBLE_CHANGES``.
_COMPATIBLE = frozenset(
    {
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)

#: Confluent's ``Difference.error()``: ``{reader}`` is the new schema, ``{writer}`` the old.
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {reader} schema does not match the "
    "package in the {writer} schema",
    "MESSAGE_REMOVED": "The {reader} schema is missing a MESSAGE type at path '{path}' in the "
    "{writer} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the {reader} schema does not "
    "match the {writer} schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the {reader} "
    "schema does not match its kind in the {writer} schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the {reader} "
    "schema does not match its type in the {writer} schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the "
    "{reader} schema does not match its label in the {writer} schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the {reader} schema is "
    "missing in the {writer} schema",
    "REQUIRED_FIELD_REMOVED": "The {reader} schema is missing a required field at path: "
    "'{path}' in the {writer} schema",
    "ONEOF_FIELD_REMOVED": "The {reader} schema is missing a oneof field at path '{path}' in "
    "the {writer} schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{path}' in the {reader} schema "
    "was moved out of its oneof to a top-level field in the {writer} schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the "
    "{reader} schema are outside a oneof in the {writer} schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the {reader} "
    "schema is outside an existing oneof in the {writer} schema",
}


def backward_problems(new: Subject, old: Subject) -> list[str]:
    """Why a reader using ``new`` could not read what ``old`` wrote, as Confluent's
    ``ProtobufSchema.isBackwardCompatible`` says it: empty when it can.

    Raises:
        InvalidSchema: either schema does not parse.
    """
    return [
        _describe(kind, path)
        for kind, path in _differences(parse(old), parse(new))
        if kind not in _COMPATIBLE
    ]


def _describe(kind: str, path: str) -> str:
    text = _DESCRIPTIONS.get(kind, "").format(path=path, reader="new", writer="old")
    return f'{{errorType:"{kind}", description:"{text}"}}'


def _differences(old: ProtoSchema, new: ProtoSchema) -> list[tuple[str, str]]:
    """Confluent's ``SchemaDiff.compare(old, new)``: every difference, as (type, path)."""
    diff = _Diff(old.space, new.space)
    if old.file.package != new.file.package:
        diff.add("PACKAGE_CHANGED")
    _compare_types(diff, old.file.types, new.file.types)
    return diff.found


class _Diff:
    """Confluent's diff ``Context``: both type spaces (``True`` is the old schema's), where the
    comparison stands (``path``, and ``names``: the enclosing types), what it found."""

    def __init__(self, old: Space, new: Space) -> None:
        self.spaces = {True: old, False: new}
        self.packages = {True: old.package, False: new.package}
        self.path: list[str] = []
        self.names: list[str] = []
        self.found: list[tuple[str, str]] = []
        self.open: set[int] = set()  # the old messages being compared (recursion guard)

    def sub(self, old_package: str, new_package: str, full_name: str) -> _Diff:
        """A context to compare a referenced message in, from its own scope."""
        diff = _Diff(self.spaces[True], self.spaces[False])
        diff.packages = {True: old_package, False: new_package}
        diff.path, diff.names = full_name.split("."), full_name.split(".")
        diff.open = set(self.open)
        return diff

    def add(self, kind: str) -> None:
        self.found.append((kind, "#/" + "/".join(self.path)))

    def compatible(self) -> bool:
        return all(kind in _COMPATIBLE for kind, _ in self.found)

    @contextmanager
    def at(self, *parts: str, named: bool = False) -> Iterator[None]:
        self.path.extend(parts)
        if named:
            self.names.extend(parts)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts) :]
            if named:
                del self.names[len(self.names) - len(parts) :]

    def resolve(self, name: str, old: bool) -> str | None:
        return _resolve(self.spaces[old].types, self.packages[old], self.names, name)

    def type_of(self, name: str, old: bool) -> TypeInfo | None:
        found = self.resolve(name, old)
        return self.spaces[old].types.get(found) if found is not None else None


# Java's HashMap iteration order, which Confluent's differences come in.


def _java_hash(key: str | int) -> int:
    if isinstance(key, int):
        h = key & 0xFFFFFFFF
    else:
        h = 0
        data = key.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h ^ (h >> 16)


K = TypeVar("K", str, int)


def _java_order(keys: Sequence[K], capacity: int = 16) -> list[K]:
    """The order a ``HashMap`` (of ``capacity`` buckets at first) iterates ``keys`` put in this
    order: by bucket, then by insertion."""
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    return sorted(keys, key=lambda k: _java_hash(k) & (capacity - 1))


def _java_union(first: Sequence[K], second: Sequence[K]) -> list[K]:
    """``new HashSet<>(first)`` then ``addAll(second)``, iterated (Java 17's sizing)."""
    wanted = max(int(len(first) / 0.75) + 1, 16)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    present: set[K] = set(first)
    keys: list[K] = list(first)
    keys.extend(k for k in second if k not in present)
    return _java_order(keys, capacity)


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _compare_types(
    diff: _Diff, old: Sequence[Message | Enum], new: Sequence[Message | Enum]
) -> None:
    """``SchemaDiff.compareTypeElements``: messages, then enums, by name."""
    old_messages = {t.name: t for t in old if isinstance(t, Message)}
    new_messages = {t.name: t for t in new if isinstance(t, Message)}
    old_index = {name: i for i, name in enumerate(m.name for m in old if isinstance(m, Message))}
    new_index = {name: i for i, name in enumerate(m.name for m in new if isinstance(m, Message))}
    names = _java_union(
        _java_order(_unique([t.name for t in old if isinstance(t, Message)])),
        _java_order(_unique([t.name for t in new if isinstance(t, Message)])),
    )
    for name in names:
        with diff.at(name, named=True):
            _compare_named_message(diff, old_messages.get(name), new_messages.get(name))
            if name in old_messages and name in new_messages and old_index[name] != new_index[name]:
                diff.add("MESSAGE_MOVED")
    old_enums = {t.name: t for t in old if isinstance(t, Enum)}
    new_enums = {t.name: t for t in new if isinstance(t, Enum)}
    for name in _java_union(
        _java_order(_unique(list(old_enums))), _java_order(_unique(list(new_enums)))
    ):
        with diff.at(name, named=True):
            if name not in new_enums:
                diff.add("ENUM_REMOVED")
            elif name not in old_enums:
                diff.add("ENUM_ADDED")
            else:
                _compare_enums(diff, old_enums[name], new_enums[name])


def _compare_named_message(diff: _Diff, old: Message | None, new: Message | None) -> None:
    if new is None and old is not None:
        info = diff.type_of(old.name, True)
        if info is not None and not info.map_entry:
            diff.add("MESSAGE_REMOVED")
    elif old is None and new is not None:
        info = diff.type_of(new.name, False)
        if info is not None and not info.map_entry:
            diff.add("MESSAGE_ADDED")
    elif old is not None and new is not None:
        _compare_messages(diff, old, new)


def _compare_enums(diff: _Diff, old: Enum, new: Enum) -> None:
    """``EnumSchemaDiff.compare``: constants by number."""
    old_by_number = {v.number: v for v in old.values}
    new_by_number = {v.number: v for v in new.values}
    numbers = _java_union(_java_order(list(old_by_number)), _java_order(list(new_by_number)))
    for number in numbers:
        with diff.at(str(number)):
            if number not in new_by_number:
                diff.add("ENUM_CONST_REMOVED")
            elif number not in old_by_number:
                diff.add("ENUM_CONST_ADDED")
            elif old_by_number[number].name != new_by_number[number].name:
                diff.add("ENUM_CONST_CHANGED")


@dataclass(slots=True)
class _Members:
    """A message's fields by number (oneofs' included), the oneof each belongs to, its oneofs."""

    by_number: dict[int, Field]
    oneof_of: dict[int, str]
    oneofs: dict[str, OneOf]

    @classmethod
    def of(cls, message: Message) -> _Members:
        members = cls({f.number: f for f in message.fields}, {}, {})
        for oneof in message.oneofs:
            members.oneofs[oneof.name] = oneof
            for f in oneof.fields:
                members.by_number[f.number] = f
                members.oneof_of[f.number] = oneof.name
        return members


def _compare_messages(diff: _Diff, old: Message, new: Message) -> None:
    """``MessageSchemaDiff.compare``."""
    key = id(old)
    if key not in diff.open:
        diff.open.add(key)
        try:
            _compare_members(diff, _Members.of(old), _Members.of(new), new)
            _compare_types(diff, old.nested, new.nested)
        finally:
            diff.open.discard(key)
    else:
        _compare_types(diff, old.nested, new.nested)


def _compare_members(diff: _Diff, old: _Members, new: _Members, message: Message) -> None:
    deleted = {
        name
        for name, oneof in old.oneofs.items()
        if name not in new.oneofs and not any(f.number in new.by_number for f in oneof.fields)
    }
    for oneof in message.oneofs:
        with diff.at(oneof.name):
            _check_moved_into(diff, old, oneof)
    for name in sorted(set(old.oneofs) | set(new.oneofs)):
        with diff.at(name):
            if name not in new.oneofs:
                diff.add("ONEOF_REMOVED")
            elif name not in old.oneofs:
                diff.add("ONEOF_ADDED")
    for number in sorted(set(old.by_number) | set(new.by_number)):
        _compare_member(diff, old, new, number, deleted)


def _check_moved_into(diff: _Diff, old: _Members, oneof: OneOf) -> None:
    """Fields that could all be set before and are now one oneof's (newly exclusive)."""
    origins: set[str] = set()
    moved = 0
    for f in oneof.fields:
        if f.number in old.oneof_of:
            origins.add("oneof:" + old.oneof_of[f.number])
        elif f.number in old.by_number:
            origins.add(f"field:{f.number}")
            moved += 1
    if len(origins) > 1:
        diff.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF")


def _compare_member(
    diff: _Diff, old: _Members, new: _Members, number: int, deleted: set[str]
) -> None:
    old_field, new_field = old.by_number.get(number), new.by_number.get(number)
    old_oneof, new_oneof = old.oneof_of.get(number), new.oneof_of.get(number)
    tag = str(number)
    if new_field is None and old_field is not None:
        if old_oneof is None:
            with diff.at(tag):
                required = old_field.label == "required"
                diff.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED")
        elif old_oneof not in deleted:
            with diff.at(old_oneof, tag):
                diff.add("ONEOF_FIELD_REMOVED")
    elif old_field is None and new_field is not None:
        if new_oneof is None:
            with diff.at(tag):
                required = new_field.label == "required"
                diff.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED")
        else:
            with diff.at(new_oneof, tag):
                diff.add("ONEOF_FIELD_ADDED")
    elif old_field is not None and new_field is not None:
        if old_oneof is not None and new_oneof is None:
            with diff.at(tag):
                diff.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
        where = (new_oneof, tag) if new_oneof is not None else (tag,)
        with diff.at(*where):
            _compare_fields(diff, old_field, new_field)


def _compare_fields(diff: _Diff, old: Field, new: Field) -> None:
    """``FieldSchemaDiff.compare``."""
    if old.name != new.name:
        diff.add("FIELD_NAME_CHANGED")
    _compare_labels_and_types(diff, old.label, new.label, old.type, new.type)


def _compare_labels_and_types(
    diff: _Diff, old_label: str | None, new_label: str | None, old_type: str, new_type: str
) -> None:
    old_type, new_type = _as_map_type(diff, old_type, True), _as_map_type(diff, new_type, False)
    old_kind, new_kind = _kind(diff, old_type, True), _kind(diff, new_type, False)
    if old_kind != new_kind:
        diff.add("FIELD_KIND_CHANGED")
    elif old_kind == "SCALAR":
        _compare_scalars(diff, old_label, new_label, old_type, new_type)
    elif old_kind == "MESSAGE":
        _compare_message_types(diff, old_type, new_type)
    else:
        old_key, old_value = _map_parts(old_type)
        new_key, new_value = _map_parts(new_type)
        _compare_labels_and_types(diff, None, None, old_key, new_key)
        _compare_labels_and_types(diff, None, None, old_value, new_value)


def _as_map_type(diff: _Diff, type_name: str, old: bool) -> str:
    info = diff.type_of(type_name, old)
    return info.map_type() if info is not None and info.map_entry else type_name


def _kind(diff: _Diff, type_name: str, old: bool) -> str:
    if type_name in _SCALARS:
        return "SCALAR"
    if _is_map(type_name):
        return "MAP"
    info = diff.type_of(type_name, old)
    return "SCALAR" if info is not None and isinstance(info.type, Enum) else "MESSAGE"


#: The scalars' groups (see protobuf's "updating a message type").
_SCALAR_GROUPS = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool"), "GENERAL_NUMBER"),
    **dict.fromkeys(("sint32", "sint64"), "SIGNED_NUMBER"),
    **dict.fromkeys(("string", "bytes"), "STRING_OR_BYTES"),
    **dict.fromkeys(("fixed32", "sfixed32"), "FIXED32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "FIXED64"),
    "float": "FLOAT",
    "double": "DOUBLE",
}


def _scalar_group(diff: _Diff, type_name: str, old: bool) -> str:
    info = diff.type_of(type_name, old)
    if info is not None and isinstance(info.type, Enum):
        return "GENERAL_NUMBER"
    return _SCALAR_GROUPS[type_name]


def _compare_scalars(
    diff: _Diff, old_label: str | None, new_label: str | None, old_type: str, new_type: str
) -> None:
    old_group, new_group = _scalar_group(diff, old_type, True), _scalar_group(diff, new_type, False)
    if old_group != new_group:
        diff.add("FIELD_SCALAR_KIND_CHANGED")
    elif old_label is not None and new_label is not None and old_label != new_label:
        if old_group == "STRING_OR_BYTES":
            diff.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
        else:
            diff.add("FIELD_NUMERIC_LABEL_CHANGED")


def _compare_message_types(diff: _Diff, old_type: str, new_type: str) -> None:
    """``FieldSchemaDiff.compareMessageTypes``: by name within the package; a message from
    another file (or another version of one) is compared field by field."""
    old_full, new_full = diff.resolve(old_type, True), diff.resolve(new_type, False)
    if old_full is None or new_full is None:
        if old_type != new_type:
            diff.add("FIELD_NAMED_TYPE_CHANGED")
        return
    old_info, new_info = diff.spaces[True].types[old_full], diff.spaces[False].types[new_full]
    old_local, new_local = _local_name(old_full, old_info), _local_name(new_full, new_info)
    if old_local != new_local:
        diff.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if old_info.origin == new_info.origin:
        return
    if not (isinstance(old_info.type, Message) and isinstance(new_info.type, Message)):
        return
    sub = diff.sub(old_info.package, new_info.package, old_local)
    _compare_messages(sub, old_info.type, new_info.type)
    diff.found.extend(sub.found)
    if not sub.compatible():
        diff.add("FIELD_NAMED_TYPE_CHANGED")


def _local_name(full: str, info: TypeInfo) -> str:
    return full.removeprefix(info.package + ".")
