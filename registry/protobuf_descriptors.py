"""PROTOBUF schemas as confluent-kafka's clients send and fetch them: the base64 of a serialized
``FileDescriptorProto`` instead of ``.proto`` text. Pure: no I/O.

Confluent's ``ProtobufSchema`` reads a schema text that does not parse as ``.proto`` as such a
descriptor, and answers ``format=serialized`` with one. This module does both halves:

- :func:`looks_serialized`: the text is base64 (which ``.proto`` text never is).
- :func:`to_text`: the descriptor to ``.proto`` text, as Confluent's
  ``toProtoFile(FileDescriptorProto)`` reads it into Wire's elements (type names as the
  descriptor holds them, maps as their entry messages with ``option map_entry = true``, oneofs
  left empty by proto3 ``optional`` dropped, the standard options it maps and the
  ``confluent.*_meta`` options) and ``canonicalString`` prints it (:mod:`protobuf_rules`'s
  printer).
- :func:`to_serialized`: ``.proto`` text (with its references' texts) to the descriptor, as
  ``formattedString("serialized")`` builds it (``toDynamicSchema``): file name ``default``,
  nested types first, then each oneof's fields, then the other fields (map fields adding their
  entry messages after the declared nested types, proto3 ``optional`` fields their synthetic
  oneofs after the real ones); imports of references and well-known files as dependencies.

Where this module departs from Confluent:

- type names in the descriptor are fully qualified (``.pkg.Msg``), as protoc writes them
  (Confluent keeps them as written and lets the reader resolve them);
- a map's entry message is named as protoc names it (``tags`` -> ``TagsEntry``; Confluent writes
  ``tagsEntry`` for a name without underscores);
- a well-known file whose types the text uses without importing it (Confluent resolves them)
  is added to the dependencies, so that a descriptor pool builds the file;
- weak imports are kept, as weak dependencies (Confluent drops them); groups written in the text
  become group fields (Confluent drops them), and a descriptor's group field whose message holds
  only fields is written as a group (Confluent writes a field of its message type, which
  changes its encoding);
- proto3 field defaults are dropped (a descriptor pool refuses them);
- an ``edition`` file is refused by :func:`to_text`, and written without its edition by
  :func:`to_serialized`.

As in Confluent, custom options (extensions of the options messages) other than Confluent's meta
are dropped both ways (its Java runtime knows only its own); standard options are kept, the
message-valued ones (``features``, ``edition_defaults``) included.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_encoding
from google.protobuf.message import DecodeError

from headwater.registry.errors import InvalidSchema
from headwater.registry.protobuf_rules import (
    KIND,
    Enum,
    EnumValue,
    Extend,
    Extensions,
    Field,
    Group,
    Message,
    OneOf,
    Opt,
    Prim,
    ProtoFile,
    Reserved,
    Rpc,
    Service,
    Space,
    _Printer,
    _resolve,
    parse,
)
from headwater.registry.subject import Subject

_FDP = descriptor_pb2.FieldDescriptorProto

#: The name Confluent gives the file it serializes (``ProtobufSchema.DEFAULT_NAME``).
DEFAULT_NAME = "default"

#: The one past the largest field number (descriptor ranges end there, exclusive).
_END_OF_TAGS = 536_870_912

#: The scalar types by name (``int32``), as the text writes them.
_SCALAR_TYPES = {
    str(name).removeprefix("TYPE_").lower(): int(number)
    for name, number in _FDP.Type.items()
    if number not in (_FDP.TYPE_GROUP, _FDP.TYPE_MESSAGE, _FDP.TYPE_ENUM)
}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_MAP = re.compile(r"map<\s*([^,\s]+)\s*,\s*([^>\s]+)\s*>")

#: The standard options Confluent maps, per options message, in the order it prints them.
_FILE_OPTIONS = (
    *("java_package", "java_outer_classname", "java_multiple_files"),
    *("java_generate_equals_and_hash", "java_string_check_utf8", "optimize_for", "go_package"),
    *("cc_generic_services", "java_generic_services", "py_generic_services", "deprecated"),
    *("cc_enable_arenas", "objc_class_prefix", "csharp_namespace", "swift_prefix"),
    *("php_class_prefix", "php_namespace", "php_metadata_namespace", "ruby_package", "features"),
)
_MESSAGE_OPTIONS = ("no_standard_descriptor_accessor", "deprecated", "map_entry", "features")
_FIELD_OPTIONS = (
    *("ctype", "packed", "jstype", "deprecated", "debug_redact", "retention", "targets"),
    *("edition_defaults", "features", "feature_support"),
)
_ONEOF_OPTIONS = ("features",)
_EXTENSION_RANGE_OPTIONS = ("declaration", "features", "verification")
_ENUM_OPTIONS = ("allow_alias", "deprecated", "features")
_ENUM_VALUE_OPTIONS = ("deprecated", "debug_redact", "features", "feature_support")
_SERVICE_OPTIONS = ("deprecated", "features")
_METHOD_OPTIONS = ("deprecated", "idempotency_level", "features")

#: Confluent's meta options (``confluent/meta.proto``), all extension 1088 of their options.
_FILE_META = "confluent.file_meta"
_MESSAGE_META = "confluent.message_meta"
_FIELD_META = "confluent.field_meta"
_ENUM_META = "confluent.enum_meta"
_ENUM_VALUE_META = "confluent.enum_value_meta"
_META_NUMBER = 1088

#: Confluent's ``Meta`` and a message holding one at the options' extension number, to read the
#: extension from (and write it to) an options message without registering the extension.
_META_TEXT = f"""syntax = "proto3";
package headwater.registry.meta;
message Meta {{
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}}
message Rule {{
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}}
message Holder {{
  Meta meta = {_META_NUMBER};
}}
"""
_RULE_KEYS = ("name", "doc", "expr", "sql")


# --- Recognizing and decoding ----------------------------------------------------------------


def looks_serialized(text: str) -> bool:
    """Whether ``text`` is base64 (of a ``FileDescriptorProto``, then) rather than ``.proto``
    text: ``.proto`` text always holds a character outside base64's alphabet (``;``, a space)."""
    return _decoded(text) is not None


def _decoded(text: str) -> bytes | None:
    """The bytes of base64 ``text`` (padding optional, as Java's decoder takes it), or None."""
    stripped = text.strip()
    if not stripped or not _BASE64.fullmatch(stripped):
        return None
    try:
        return base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)
    except binascii.Error:
        return None


def _descriptor(serialized: str) -> Any:
    """The ``FileDescriptorProto`` of base64 ``serialized``.

    Raises:
        InvalidSchema: not base64, not a descriptor, or one this module cannot print.
    """
    data = _decoded(serialized)
    if data is None:
        raise InvalidSchema("Could not parse Protobuf - neither .proto text nor base64")
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(data)
    except DecodeError as error:
        raise InvalidSchema(
            f"Could not parse Protobuf - not a serialized FileDescriptorProto: {error}"
        ) from None
    _check(proto)
    return proto


def _check(proto: Any) -> None:
    """Raises InvalidSchema for what the text could not say (a nameless or misnamed element, a
    named field type without its name) or this module does not print (editions)."""
    if proto.syntax not in ("", "proto2", "proto3"):
        raise InvalidSchema(f"Could not parse Protobuf - unsupported syntax '{proto.syntax}'")
    for kind, name in _names(proto):
        if not _IDENTIFIER.fullmatch(name):
            raise InvalidSchema(f"Could not parse Protobuf - invalid {kind} name '{name}'")
    for field in _all_fields(proto):
        named = field.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_ENUM, _FDP.TYPE_GROUP)
        if field.number <= 0 or (named or not field.HasField("type")) and not field.type_name:
            raise InvalidSchema(f"Could not parse Protobuf - invalid field '{field.name}'")
    for field in _extension_fields(proto):
        if not field.extendee:
            raise InvalidSchema(
                f"Could not parse Protobuf - extension '{field.name}' extends nothing"
            )


def _names(proto: Any) -> Iterator[tuple[str, str]]:
    for message in _all_messages(proto.message_type):
        yield "message", message.name
        yield from (("field", f.name) for f in [*message.field, *message.extension])
        yield from (("oneof", o.name) for o in message.oneof_decl)
    for enum in _all_enums(proto):
        yield "enum", enum.name
        yield from (("enum constant", v.name) for v in enum.value)
    yield from (("field", f.name) for f in proto.extension)
    for service in proto.service:
        yield "service", service.name
        yield from (("method", m.name) for m in service.method)


def _all_messages(messages: Iterable[Any]) -> Iterator[Any]:
    for message in messages:
        yield message
        yield from _all_messages(message.nested_type)


def _all_enums(proto: Any) -> Iterator[Any]:
    yield from proto.enum_type
    for message in _all_messages(proto.message_type):
        yield from message.enum_type


def _all_fields(proto: Any) -> Iterator[Any]:
    yield from _extension_fields(proto)
    for message in _all_messages(proto.message_type):
        yield from message.field


def _extension_fields(proto: Any) -> Iterator[Any]:
    yield from proto.extension
    for message in _all_messages(proto.message_type):
        yield from message.extension


# --- Descriptor to text ----------------------------------------------------------------------


def to_text(serialized: str) -> str:
    """The ``.proto`` text of base64 ``FileDescriptorProto`` ``serialized``, as Confluent's
    registry prints such a schema.

    Raises:
        InvalidSchema: ``serialized`` is not base64 of a valid ``FileDescriptorProto``.
    """
    return _Printer(False, None).file(_file(_descriptor(serialized)))


def _file(proto: Any) -> ProtoFile:
    """Confluent's ``toProtoFile(FileDescriptorProto)``."""
    file = ProtoFile(syntax=proto.syntax or None, package=proto.package or None)
    public, weak = set(proto.public_dependency), set(proto.weak_dependency)
    for index, path in enumerate(proto.dependency):
        if index in public:
            file.public_imports.append(path)
        elif index in weak:
            file.weak_imports.append(path)
        else:
            file.imports.append(path)
    file.options = _options(proto.options, _FILE_OPTIONS, _FILE_META)
    proto3 = proto.syntax == "proto3"
    file.types.extend(_message(m, proto3) for m in proto.message_type)
    file.types.extend(_enum(e) for e in proto.enum_type)
    file.extends = _extends(proto.extension, proto3)
    file.services = [_service(s) for s in proto.service]
    return file


def _message(proto: Any, proto3: bool) -> Message:
    message = Message(proto.name)
    oneofs = [OneOf(o.name, options=_options(o.options, _ONEOF_OPTIONS)) for o in proto.oneof_decl]
    groups = _groups(proto)
    for f in proto.field:
        in_oneof = f.HasField("oneof_index") and not f.proto3_optional
        if in_oneof and not 0 <= f.oneof_index < len(oneofs):
            raise InvalidSchema(f"Could not parse Protobuf - bad oneof index of '{f.name}'")
        holder: Message | OneOf = oneofs[f.oneof_index] if in_oneof else message
        if f.name in groups:
            group = groups[f.name]
            fields = [_field(g, proto3) for g in group.field]
            holder.groups.append(Group(group.name, f.number, _group_label(f, in_oneof), fields))
        else:
            holder.fields.append(_field(f, proto3, in_oneof))
    message.oneofs = [o for o in oneofs if o.fields or o.groups]
    kept = {id(g) for g in groups.values()}
    message.nested.extend(_message(m, proto3) for m in proto.nested_type if id(m) not in kept)
    message.nested.extend(_enum(e) for e in proto.enum_type)
    message.reserved.extend([_range(r.start, r.end - 1)] for r in proto.reserved_range)
    message.reserved.extend([name] for name in proto.reserved_name)
    message.extensions = [
        Extensions([_range(r.start, r.end - 1)], _options(r.options, _EXTENSION_RANGE_OPTIONS))
        for r in proto.extension_range
    ]
    message.options = _options(proto.options, _MESSAGE_OPTIONS, _MESSAGE_META)
    message.extends = _extends(proto.extension, proto3)
    return message


#: What a group's message cannot have besides fields (a group in the text has only fields).
_GROUP_LESS = (
    *("nested_type", "enum_type", "oneof_decl", "extension", "extension_range"),
    *("reserved_range", "reserved_name"),
)


def _groups(proto: Any) -> dict[str, Any]:
    """The group fields of message ``proto`` that the text can write as groups (their messages
    nested in ``proto``, holding only fields), by field name: their messages. Confluent writes
    a group as a field of its message type, which changes its encoding."""
    nested = {m.name: m for m in proto.nested_type}
    found: dict[str, Any] = {}
    for f in proto.field:
        message = nested.get(f.type_name.rsplit(".", 1)[-1])
        if f.type != _FDP.TYPE_GROUP or message is None or f.name != message.name.lower():
            continue
        if not message.HasField("options") and not any(
            getattr(message, part) for part in _GROUP_LESS
        ):
            found[f.name] = message
    return found


def _group_label(proto: Any, in_oneof: bool) -> str | None:
    if in_oneof:
        return None
    return {_FDP.LABEL_REPEATED: "repeated", _FDP.LABEL_REQUIRED: "required"}.get(
        proto.label, "optional"
    )


def _range(start: int, end: int) -> Reserved:
    """A range with both ends included, as Wire holds it."""
    return start if start == end else (start, end)


def _field(proto: Any, proto3: bool, in_oneof: bool = False) -> Field:
    field = Field(proto.name, proto.number, proto.type_name or _scalar_name(proto.type))
    field.label = None if in_oneof else _label(proto, proto3)
    field.options = _options(proto.options, _FIELD_OPTIONS, _FIELD_META)
    if proto.HasField("json_name"):
        field.json_name = proto.json_name
    if not proto3 and proto.HasField("default_value"):
        field.default = _default(proto)
    return field


def _scalar_name(number: int) -> str:
    try:
        return str(_FDP.Type.Name(number)).removeprefix("TYPE_").lower()
    except ValueError:
        raise InvalidSchema(f"Could not parse Protobuf - unknown field type {number}") from None


def _label(proto: Any, proto3: bool) -> str | None:
    """Confluent's ``label``: proto3 writes only ``repeated`` and ``optional`` (its explicit
    presence)."""
    if proto.proto3_optional:
        return "optional"
    if proto.label == _FDP.LABEL_REPEATED:
        return "repeated"
    if proto3:
        return None
    return "required" if proto.label == _FDP.LABEL_REQUIRED else "optional"


def _default(proto: Any) -> str | Prim:
    """A proto2 field's default as the text holds it: a string's value, a ``bytes`` field's
    bytes (the descriptor C-escapes them) as characters, else the token."""
    value: str = proto.default_value
    if proto.type == _FDP.TYPE_STRING:
        return value
    if proto.type == _FDP.TYPE_BYTES:
        return bytes(text_encoding.CUnescape(value)).decode("latin-1")
    if proto.type == _FDP.TYPE_BOOL:
        return Prim("BOOLEAN", value)
    return Prim("ENUM" if proto.type == _FDP.TYPE_ENUM else "NUMBER", value)


def _enum(proto: Any) -> Enum:
    enum = Enum(proto.name)
    for value in proto.value:
        options = _options(value.options, _ENUM_VALUE_OPTIONS, _ENUM_VALUE_META)
        enum.values.append(EnumValue(value.name, value.number, options))
    enum.reserved.extend([_range(r.start, r.end)] for r in proto.reserved_range)
    enum.reserved.extend([name] for name in proto.reserved_name)
    enum.options = _options(proto.options, _ENUM_OPTIONS, _ENUM_META)
    return enum


def _extends(fields: Iterable[Any], proto3: bool) -> list[Extend]:
    """Extension fields grouped by their (fully qualified) extendee, first seen first."""
    grouped: dict[str, list[Field]] = {}
    for f in fields:
        grouped.setdefault(f.extendee, []).append(_field(f, proto3))
    return [Extend(name, fields) for name, fields in grouped.items()]


def _service(proto: Any) -> Service:
    service = Service(proto.name, _options(proto.options, _SERVICE_OPTIONS), [])
    for method in proto.method:
        service.rpcs.append(
            Rpc(
                method.name,
                method.input_type,
                method.output_type,
                method.client_streaming,
                method.server_streaming,
                _options(method.options, _METHOD_OPTIONS),
            )
        )
    return service


def _options(options: Any, names: Sequence[str], meta: str | None = None) -> list[Opt]:
    """The standard options ``names`` set in ``options``, then its Confluent meta (as
    ``meta``)."""
    found: list[Opt] = []
    fields = options.DESCRIPTOR.fields_by_name
    for name in names:
        field = fields.get(name)
        if field is None:
            continue
        if _is_repeated(field):
            found.extend(Opt(name, _option_value(field, v)) for v in getattr(options, name))
        elif options.HasField(name):
            found.append(Opt(name, _option_value(field, getattr(options, name))))
    if meta is not None:
        value = _read_meta(options)
        if value:
            found.append(Opt(meta, value, parenthesized=True))
    return found


def _is_repeated(field: Any) -> bool:
    """Whether a ``FieldDescriptor`` is repeated (protobuf 7 dropped ``label`` for this)."""
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return bool(field.label == _FDP.LABEL_REPEATED)


def _option_value(field: Any, value: Any) -> Any:
    """An option's value as :mod:`protobuf_rules` holds it: a message's as a map of its set
    fields (extensions left out)."""
    if field.message_type is not None:
        found: dict[str, Any] = {}
        for inner, inner_value in value.ListFields():
            if inner.is_extension:
                continue
            if _is_repeated(inner):
                found[inner.name] = [_option_value(inner, v) for v in inner_value]
            else:
                found[inner.name] = _option_value(inner, inner_value)
        return found
    if field.type == field.TYPE_BOOL:
        return Prim("BOOLEAN", "true" if value else "false")
    if field.enum_type is not None:
        named = field.enum_type.values_by_number.get(value)
        return Prim("ENUM", named.name if named is not None else str(value))
    if field.type == field.TYPE_STRING:
        return str(value)
    return Prim("NUMBER", str(value))


# --- Confluent's meta options ----------------------------------------------------------------


@cache
def _meta_holder() -> Any:
    """The message class holding a ``Meta`` at the options' extension number."""
    proto = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(to_serialized(_META_TEXT, {}))
    )
    proto.name = "headwater_meta_holder.proto"  # a name in this pool only
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("headwater.registry.meta.Holder")
    )


def _read_meta(options: Any) -> dict[str, Any]:
    """The Confluent meta in ``options`` as Confluent's ``toOption(name, Meta)`` makes it (empty
    for none)."""
    holder = _meta_holder().FromString(options.SerializeToString())
    if not holder.HasField("meta"):
        return {}
    meta, found = holder.meta, {}
    if meta.doc:
        found["doc"] = meta.doc
    if meta.params:
        found["params"] = [_param(key, value) for key, value in meta.params.items()]
    if meta.tags:
        found["tags"] = list(meta.tags)
    rules = [{k: getattr(r, k) for k in _RULE_KEYS if getattr(r, k)} for r in meta.rules]
    if any(rules):
        found["rules"] = [rule for rule in rules if rule]
    return found


def _param(key: str, value: str) -> dict[str, str]:
    """A param entry; Confluent writes the value first for ``precision`` and ``scale``."""
    if key in ("precision", "scale"):
        return {"value": value, "key": key}
    return {"key": key, "value": value}


def _write_meta(options: Any, values: Mapping[str, Any]) -> None:
    """Sets the Confluent meta of ``options`` from an option's merged value (Confluent's
    ``findMeta``)."""
    holder = _meta_holder()()
    meta = holder.meta
    if "doc" in values:
        meta.doc = _text(values["doc"])
    for entry in _listed(values.get("params")):
        if isinstance(entry, Mapping):
            meta.params[_text(entry.get("key", ""))] = _text(entry.get("value", ""))
    meta.tags.extend(_text(tag) for tag in _listed(values.get("tags")))
    for entry in _listed(values.get("rules")):
        if isinstance(entry, Mapping):
            rule = meta.rules.add()
            for key in _RULE_KEYS:
                if key in entry:
                    setattr(rule, key, _text(entry[key]))
    if holder.HasField("meta"):
        options.MergeFromString(holder.SerializeToString())


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _text(value: Any) -> str:
    return value.text if isinstance(value, Prim) else str(value)


# --- Text to descriptor ----------------------------------------------------------------------


def to_serialized(text: str, references: Mapping[str, str]) -> str:
    """The base64 ``FileDescriptorProto`` of ``.proto`` ``text`` (``references``: the texts of
    the files it imports, by import path; well-known files need none), as Confluent answers
    ``format=serialized``.

    Raises:
        InvalidSchema: the text does not parse, or names a type or import it cannot resolve.
    """
    schema = parse(Subject(KIND, text, dict(references)))
    proto = _Builder(schema.space).file(schema.file)
    return base64.b64encode(proto.SerializeToString()).decode("ascii")


class _Builder:
    """Confluent's ``toDynamicSchema``, with type names resolved in ``space`` (the schema's
    own, its references' and the well-known files' types)."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.proto3 = False
        #: The well-known files whose types the text uses without importing them (Confluent
        #: resolves those; a descriptor pool needs the import).
        self.known_uses: list[str] = []

    def file(self, file: ProtoFile) -> Any:
        proto = descriptor_pb2.FileDescriptorProto(name=DEFAULT_NAME)
        self.proto3 = file.syntax == "proto3"
        if file.syntax is not None:
            proto.syntax = file.syntax
        if file.package is not None:
            proto.package = file.package
        for paths, indexes in (
            (file.imports, None),
            (file.public_imports, proto.public_dependency),
            (file.weak_imports, proto.weak_dependency),
        ):
            for path in paths:
                if indexes is not None:
                    indexes.append(len(proto.dependency))
                proto.dependency.append(path)
        for element in file.types:
            self._add_type(proto.message_type, proto.enum_type, element, [])
        proto.service.extend(self._service(s) for s in file.services)
        proto.extension.extend(self._extension_fields(file.extends, []))
        _set_options(proto.options, file.options, _FILE_META)
        imported = set(file.all_imports())
        proto.dependency.extend(path for path in self.known_uses if path not in imported)
        return proto

    def _add_type(
        self, messages: Any, enums: Any, element: Message | Enum, scope: list[str]
    ) -> None:
        if isinstance(element, Message):
            messages.append(self._message(element, scope))
        else:
            enums.append(_enum_proto(element))

    def _message(self, message: Message, scope: list[str]) -> Any:
        proto = descriptor_pb2.DescriptorProto(name=message.name)
        inner = [*scope, message.name]
        for element in message.nested:
            self._add_type(proto.nested_type, proto.enum_type, element, inner)
        for oneof in message.oneofs:
            self._oneof(proto, oneof, inner)
        for field in message.fields:
            self._plain_field(proto, field, inner)
        for group in message.groups:
            proto.field.append(self._group(proto, group, inner))
        for values in message.reserved:
            _reserve(proto, values, inclusive_end=False)
        for extensions in message.extensions:
            for value in extensions.values:
                if not isinstance(value, str):
                    start, end = _bounds(value)
                    made = proto.extension_range.add(start=start, end=min(end + 1, _END_OF_TAGS))
                    _set_options(made.options, extensions.options, None)
        proto.extension.extend(self._extension_fields(message.extends, inner))
        _set_options(proto.options, message.options, _MESSAGE_META)
        return proto

    def _oneof(self, proto: Any, oneof: OneOf, scope: list[str]) -> None:
        if not oneof.fields and not oneof.groups:
            return
        index = len(proto.oneof_decl)
        made_oneof = proto.oneof_decl.add(name=oneof.name)
        _set_options(made_oneof.options, oneof.options, None)
        for field in oneof.fields:
            made = self._field(field, scope, _FDP.LABEL_OPTIONAL)
            made.oneof_index = index
            proto.field.append(made)
        for group in oneof.groups:
            made = self._group(proto, group, scope)
            made.oneof_index = index
            proto.field.append(made)

    def _plain_field(self, proto: Any, field: Field, scope: list[str]) -> None:
        """A field outside oneofs: a map's adds its entry message, a proto3 ``optional``'s its
        synthetic oneof."""
        if _MAP.fullmatch(field.type):
            proto.nested_type.append(self._map_entry(field, scope))
            made = self._field(field, scope, _FDP.LABEL_REPEATED)
            made.type = _FDP.TYPE_MESSAGE
            made.type_name = self._full_name([*scope, _map_entry_name(field.name)])
        elif field.label == "optional" and self.proto3:
            made = self._field(field, scope, _FDP.LABEL_OPTIONAL)
            made.proto3_optional = True
            made.oneof_index = len(proto.oneof_decl)
            proto.oneof_decl.add(name="_" + field.name)
        else:
            made = self._field(field, scope, _label_number(field.label))
        proto.field.append(made)

    def _map_entry(self, field: Field, scope: list[str]) -> Any:
        match = _MAP.fullmatch(field.type)
        assert match is not None
        entry = descriptor_pb2.DescriptorProto(name=_map_entry_name(field.name))
        entry.options.map_entry = True
        for number, (name, type_name) in enumerate(zip(("key", "value"), match.groups()), 1):
            made = descriptor_pb2.FieldDescriptorProto(
                name=name, number=number, label=_FDP.LABEL_OPTIONAL
            )
            self._set_type(made, type_name, scope)
            entry.field.append(made)
        return entry

    def _field(self, field: Field, scope: list[str], label: int) -> Any:
        proto = descriptor_pb2.FieldDescriptorProto(
            name=field.name, number=field.number, label=label
        )
        if not _MAP.fullmatch(field.type):
            self._set_type(proto, field.type, scope)
        if field.default is not None and not self.proto3:
            proto.default_value = _default_value(proto.type, field.default)
        if field.json_name is not None:
            proto.json_name = field.json_name
        _set_options(proto.options, field.options, _FIELD_META)
        return proto

    def _group(self, proto: Any, group: Group, scope: list[str]) -> Any:
        """A group's field, its message added to ``proto``'s nested types."""
        inner = [*scope, group.name]
        nested = proto.nested_type.add(name=group.name)
        for field in group.fields:
            nested.field.append(self._field(field, inner, _label_number(field.label)))
        made = descriptor_pb2.FieldDescriptorProto(
            name=group.name.lower(),
            number=group.number,
            label=_label_number(group.label),
            type=_FDP.TYPE_GROUP,
            type_name=self._full_name(inner),
        )
        return made

    def _set_type(self, proto: Any, type_name: str, scope: list[str]) -> None:
        if type_name in _SCALAR_TYPES:
            proto.type = _SCALAR_TYPES[type_name]
            return
        full = self._resolve(type_name, scope)
        info = self.space.types[full]
        proto.type = _FDP.TYPE_MESSAGE if isinstance(info.type, Message) else _FDP.TYPE_ENUM
        proto.type_name = "." + full

    def _resolve(self, name: str, scope: list[str]) -> str:
        full = _resolve(self.space.types, self.space.package, scope, name)
        if full is None:
            raise InvalidSchema(f"Invalid schema: type '{name}' is not defined")
        origin = self.space.types[full].origin
        if origin[0] == "known" and origin[1] not in self.known_uses:
            self.known_uses.append(origin[1])
        return full

    def _full_name(self, path: Sequence[str]) -> str:
        """The fully qualified name of a type declared in this file at ``path``."""
        return ".".join(["", *([self.space.package] if self.space.package else []), *path])

    def _extension_fields(self, extends: Sequence[Extend], scope: list[str]) -> Iterator[Any]:
        for extend in extends:
            extendee = "." + self._resolve(extend.name, scope)
            for field in extend.fields:
                made = self._field(field, scope, _label_number(field.label))
                made.extendee = extendee
                yield made

    def _service(self, service: Service) -> Any:
        proto = descriptor_pb2.ServiceDescriptorProto(name=service.name)
        for rpc in service.rpcs:
            method = proto.method.add(
                name=rpc.name,
                input_type="." + self._resolve(rpc.request, []),
                output_type="." + self._resolve(rpc.response, []),
            )
            if rpc.request_stream:
                method.client_streaming = True
            if rpc.response_stream:
                method.server_streaming = True
            _set_options(method.options, rpc.options, None)
        _set_options(proto.options, service.options, None)
        return proto


def _map_entry_name(field_name: str) -> str:
    """protoc's ``MapEntryName``: the field's name in upper camel case, then ``Entry``."""
    parts = [part for part in field_name.split("_") if part]
    return "".join(part[0].upper() + part[1:] for part in parts) + "Entry"


def _label_number(label: str | None) -> int:
    if label == "repeated":
        return int(_FDP.LABEL_REPEATED)
    if label == "required":
        return int(_FDP.LABEL_REQUIRED)
    return int(_FDP.LABEL_OPTIONAL)


def _default_value(field_type: int, value: str | Prim) -> str:
    """A default as the descriptor holds it (a ``bytes`` field's C-escaped)."""
    text = _text(value)
    if field_type == _FDP.TYPE_BYTES:
        try:
            data = text.encode("latin-1")
        except UnicodeEncodeError:
            data = text.encode("utf-8")
        return str(text_encoding.CEscape(data, False))
    return text


def _enum_proto(enum: Enum) -> Any:
    proto = descriptor_pb2.EnumDescriptorProto(name=enum.name)
    for value in enum.values:
        made = proto.value.add(name=value.name, number=value.number)
        _set_options(made.options, value.options, _ENUM_VALUE_META)
    for values in enum.reserved:
        _reserve(proto, values, inclusive_end=True)
    _set_options(proto.options, enum.options, _ENUM_META)
    return proto


def _reserve(proto: Any, values: Sequence[Reserved], inclusive_end: bool) -> None:
    for value in values:
        if isinstance(value, str):
            proto.reserved_name.append(value)
            continue
        start, end = _bounds(value)
        proto.reserved_range.add(start=start, end=end if inclusive_end else end + 1)


def _bounds(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else value


# --- Options, text to descriptor -------------------------------------------------------------


def _set_options(options: Any, written: Sequence[Opt], meta: str | None) -> None:
    """Sets the standard options ``written`` names (their scalar fields) and, merged,
    Confluent's meta option ``meta``; other custom options are dropped, as Confluent drops
    them."""
    merged: dict[str, Any] = {}
    for option in written:
        name = option.name.removeprefix(".")
        if option.parenthesized:
            if name == meta:
                _merge(merged, _as_map(option.value))
        else:
            value = _as_map(option.value) if isinstance(option.value, Opt) else option.value
            _set_option(options, name, value)
    if merged:
        _write_meta(options, merged)


def _set_option(options: Any, name: str, value: Any) -> None:
    """Sets field ``name`` of options message ``options`` (or of a message inside one) from
    ``value``: a map sets a message's fields; unknown names and ``[extension]`` keys are
    dropped."""
    field = options.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        return
    for item in _listed(value) if _is_repeated(field) else [value]:
        if field.message_type is not None:
            if not isinstance(item, Mapping):
                raise InvalidSchema(f"Invalid schema: option '{name}' needs a message value")
            target = getattr(options, name).add() if _is_repeated(field) else getattr(options, name)
            for key, inner in item.items():
                _set_option(target, key, inner)
        elif _is_repeated(field):
            getattr(options, name).append(_option_scalar(field, item))
        else:
            setattr(options, name, _option_scalar(field, item))


def _option_scalar(field: Any, value: str | Prim) -> Any:
    text = _text(value)
    try:
        if field.type == field.TYPE_BOOL:
            return text == "true"
        if field.enum_type is not None:
            return field.enum_type.values_by_name[text].number
        if field.type == field.TYPE_STRING:
            return text
        if field.type in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
            return float(text)
        return int(text, 0)
    except (KeyError, ValueError):
        raise InvalidSchema(
            f"Invalid schema: bad value '{text}' for option '{field.name}'"
        ) from None


def _as_map(value: Any) -> dict[str, Any]:
    """An option's value as a map (Confluent's ``transform``: ``(a).b.c = v`` is
    ``{b: {c: v}}``)."""
    if isinstance(value, Opt):
        inner = _as_map(value.value) if isinstance(value.value, Opt) else value.value
        return {value.name: inner}
    return dict(value) if isinstance(value, Mapping) else {}


def _merge(into: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Confluent's ``merge``: a key given twice collects its values, without repeats."""
    for key, value in values.items():
        if key not in into:
            into[key] = value
            continue
        collected = _listed(into[key])
        collected.extend(v for v in _listed(value) if v not in collected)
        into[key] = collected
