"""PROTOBUF schemas as base64 ``FileDescriptorProto`` (``headwater.registry.protobuf_descriptors``):
what confluent-kafka's ``ProtobufSerializer`` registers, to ``.proto`` text, and text back to the
descriptor its ``ProtobufDeserializer`` fetches with ``format=serialized``.

Descriptors are built as protoc builds them and read through protobuf's own descriptor pool; the
client's functions (``_schema_to_str``, ``_str_to_proto``, ``_init_pool``) and its serializer and
deserializer are the real ones.
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.common.protobuf import (
    _init_pool,
    _schema_to_str,
    _str_to_proto,
)
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from headwater.registry.errors import InvalidSchema
from headwater.registry.protobuf_descriptors import looks_serialized, to_serialized, to_text
from headwater.registry.protobuf_rules import KIND, parse
from headwater.registry.subject import Subject

F = descriptor_pb2.FieldDescriptorProto
OPTIONAL, REPEATED = F.LABEL_OPTIONAL, F.LABEL_REPEATED


# --- Descriptors as protoc builds them ----------------------------------------------------------


def order_file() -> descriptor_pb2.FileDescriptorProto:
    """``shop/order.proto`` as protoc compiles it::

        syntax = "proto3";
        package shop.v1;
        import "google/protobuf/timestamp.proto";
        option java_package = "com.shop";
        message Order {
          string id = 1;
          map<string, string> tags = 2;
          message Line { string sku = 1; int32 qty = 2; }
          repeated Line lines = 3;
          enum Status { UNKNOWN = 0; PAID = 1; }
          Status status = 4;
          google.protobuf.Timestamp placed_at = 5;
          oneof payment { string card = 6; int64 cash_cents = 7; }
          optional string note = 8;
          map<int32, Line> lines_by_no = 9;
        }

    (maps' entry messages among the nested types where their fields are declared).
    """
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto",
        package="shop.v1",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    file.options.java_package = "com.shop"
    order = file.message_type.add(name="Order")
    order.nested_type.append(entry("TagsEntry", F.TYPE_STRING, F.TYPE_STRING))
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, label=OPTIONAL, type=F.TYPE_STRING)
    line.field.add(name="qty", number=2, label=OPTIONAL, type=F.TYPE_INT32)
    order.nested_type.append(entry("LinesByNoEntry", F.TYPE_INT32, ".shop.v1.Order.Line"))
    status = order.enum_type.add(name="Status")
    status.value.add(name="UNKNOWN", number=0)
    status.value.add(name="PAID", number=1)
    add = order.field.add
    add(name="id", number=1, label=OPTIONAL, type=F.TYPE_STRING)
    add(name="tags", number=2, label=REPEATED, type=F.TYPE_MESSAGE)
    order.field[-1].type_name = ".shop.v1.Order.TagsEntry"
    add(
        name="lines", number=3, label=REPEATED, type=F.TYPE_MESSAGE, type_name=".shop.v1.Order.Line"
    )
    add(
        name="status", number=4, label=OPTIONAL, type=F.TYPE_ENUM, type_name=".shop.v1.Order.Status"
    )
    add(name="placed_at", number=5, label=OPTIONAL, type=F.TYPE_MESSAGE)
    order.field[-1].type_name = ".google.protobuf.Timestamp"
    order.oneof_decl.add(name="payment")
    add(name="card", number=6, label=OPTIONAL, type=F.TYPE_STRING, oneof_index=0)
    add(name="cash_cents", number=7, label=OPTIONAL, type=F.TYPE_INT64, oneof_index=0)
    order.oneof_decl.add(name="_note")
    add(name="note", number=8, label=OPTIONAL, type=F.TYPE_STRING, oneof_index=1)
    order.field[-1].proto3_optional = True
    add(name="lines_by_no", number=9, label=REPEATED, type=F.TYPE_MESSAGE)
    order.field[-1].type_name = ".shop.v1.Order.LinesByNoEntry"
    return file


def entry(name: str, key: int, value: int | str) -> descriptor_pb2.DescriptorProto:
    """A map's entry message (``value`` a type name for a message value)."""
    message = descriptor_pb2.DescriptorProto(name=name)
    message.options.map_entry = True
    message.field.add(name="key", number=1, label=OPTIONAL, type=key)
    if isinstance(value, str):
        message.field.add(
            name="value", number=2, label=OPTIONAL, type=F.TYPE_MESSAGE, type_name=value
        )
    else:
        message.field.add(name="value", number=2, label=OPTIONAL, type=value)
    return message


def message_class(file: Any, name: str, *dependencies: Any) -> Any:
    """The message class ``name`` of ``file``, built in a pool of its own as the client builds
    one (well-known files first)."""
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    for dependency in (*dependencies, file):
        pool.Add(dependency)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def fetched(serialized: str, name: str = "default", *dependencies: Any) -> Any:
    """The file descriptor a deserializer builds from a ``format=serialized`` answer."""
    proto = _str_to_proto(name, serialized)
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    for dependency in dependencies:
        pool.Add(dependency)
    pool.Add(proto)
    return pool.FindFileByName(name)


def shape(messages: Any) -> Iterator[tuple[Any, ...]]:
    """Every message's fields (by number), oneofs and nested types, in a comparable form."""
    for message in messages:
        oneofs = [(o.name, sorted(f.name for f in o.fields)) for o in message.oneofs]
        yield message.full_name, message.GetOptions().map_entry, oneofs
        for f in sorted(message.fields, key=lambda f: f.number):
            kind = f.message_type or f.enum_type
            yield (
                message.full_name,
                f.name,
                f.number,
                f.type,
                f.is_repeated,
                f.is_required,
                f.has_presence,
                kind.full_name if kind is not None else None,
                f.containing_oneof.name if f.containing_oneof is not None else None,
            )
        yield message.full_name, [m.name for m in message.nested_types]
        yield from shape(message.nested_types)
        for enum in message.enum_types:
            yield enum.full_name, [(v.name, v.number) for v in enum.values]


def b64(file: Any) -> str:
    return base64.b64encode(file.SerializeToString()).decode("ascii")


def unb64(serialized: str) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))


# --- Recognizing -------------------------------------------------------------------------------


def test_looks_serialized_tells_base64_from_proto_text() -> None:
    assert looks_serialized(b64(order_file()))
    assert looks_serialized("\n" + b64(order_file()) + "\n")
    assert looks_serialized(b64(order_file()).rstrip("="))  # Java's decoder takes it unpadded
    assert not looks_serialized('syntax = "proto3";\nmessage A {\n  int32 a = 1;\n}\n')
    assert not looks_serialized("message A{}")
    assert not looks_serialized("")
    assert not looks_serialized("   ")


# --- The client's schema, both ways ------------------------------------------------------------


def test_what_the_serializer_registers_reads_as_text_and_serializes_back() -> None:
    original = message_class(order_file(), "shop.v1.Order")
    registered = _schema_to_str(original.DESCRIPTOR.file)  # exactly what the serializer sends
    assert looks_serialized(registered)
    text = to_text(registered)
    schema = parse(Subject(KIND, text, {}))  # the registry's own rules accept it
    assert schema.file.package == "shop.v1"
    assert schema.file.imports == ["google/protobuf/timestamp.proto"]

    served = to_serialized(text, {})
    again = fetched(served)
    assert list(shape([again.message_types_by_name["Order"]])) == list(shape([original.DESCRIPTOR]))
    assert again.package == "shop.v1"
    assert again.dependencies[0].name == "google/protobuf/timestamp.proto"
    assert unb64(served).options.java_package == "com.shop"


def test_the_texts_are_confluents() -> None:
    text = to_text(b64(order_file()))
    assert text.startswith(
        'syntax = "proto3";\npackage shop.v1;\n\nimport "google/protobuf/timestamp.proto";\n\n'
        'option java_package = "com.shop";\n\nmessage Order {\n'
    )
    for line in (
        "  string id = 1;\n",
        "  repeated .shop.v1.Order.TagsEntry tags = 2;\n",
        "  .shop.v1.Order.Status status = 4;\n",
        "  .google.protobuf.Timestamp placed_at = 5;\n",
        "  optional string note = 8;\n",
        "  oneof payment {\n    string card = 6;\n    int64 cash_cents = 7;\n  }\n",
        "  message TagsEntry {\n    option map_entry = true;\n  \n    string key = 1;\n",
        "  enum Status {\n    UNKNOWN = 0;\n    PAID = 1;\n  }\n",
    ):
        assert line in text
    assert "_note" not in text  # proto3 optional's synthetic oneof is not written


def test_messages_keep_their_index_and_values_their_encoding() -> None:
    """Nested types keep their order (the serializer's message indexes point into it) and a
    message written with the original class reads the same with the fetched one."""
    original = message_class(order_file(), "shop.v1.Order")
    served = to_serialized(to_text(_schema_to_str(original.DESCRIPTOR.file)), {})
    file = fetched(served)
    order = file.message_types_by_name["Order"]
    assert [m.name for m in order.nested_types] == ["TagsEntry", "Line", "LinesByNoEntry"]
    value = original(
        id="o-1",
        tags={"a": "b"},
        lines=[original.Line(sku="x", qty=2)],
        status=1,
        cash_cents=250,
        note="",
        lines_by_no={3: original.Line(sku="y")},
    )
    value.placed_at.FromSeconds(1_700_000_000)
    copy = message_factory.GetMessageClass(order).FromString(value.SerializeToString())
    assert json_format.MessageToDict(copy) == json_format.MessageToDict(value)
    assert copy.HasField("note") and copy.WhichOneof("payment") == "cash_cents"
    assert copy.tags["a"] == "b" and copy.lines_by_no[3].sku == "y"


def test_a_text_schema_serializes_as_protoc_would_resolve_it() -> None:
    text = """syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
message Order {
  map<string, Line> lines = 1;
  Status status = 2;
  google.protobuf.Timestamp at = 3;
  optional int32 count = 4;
  oneof pick { string a = 5; Line b = 6; }
  repeated Line.Part parts = 7;
  message Line { string sku = 1; message Part { int32 n = 1; } }
}
enum Status { UNKNOWN = 0; }
"""
    proto = unb64(to_serialized(text, {}))
    assert proto.name == "default"  # Confluent's name for the file it serializes
    assert list(proto.dependency) == ["google/protobuf/timestamp.proto"]
    order = proto.message_type[0]
    assert [m.name for m in order.nested_type] == ["Line", "LinesEntry"]  # entries last
    assert order.nested_type[1].options.map_entry
    fields = {f.name: f for f in order.field}
    assert (fields["lines"].label, fields["lines"].type_name) == (
        REPEATED,
        ".shop.v1.Order.LinesEntry",
    )
    assert (fields["status"].type, fields["status"].type_name) == (F.TYPE_ENUM, ".shop.v1.Status")
    assert (fields["at"].type, fields["at"].type_name) == (
        F.TYPE_MESSAGE,
        ".google.protobuf.Timestamp",
    )
    assert fields["parts"].type_name == ".shop.v1.Order.Line.Part"
    assert order.nested_type[1].field[1].type_name == ".shop.v1.Order.Line"
    assert [o.name for o in order.oneof_decl] == ["pick", "_count"]  # synthetic after real
    assert fields["count"].proto3_optional and fields["count"].oneof_index == 1
    assert [f.name for f in order.field][:2] == ["a", "b"]  # oneofs' fields first, as Confluent

    cls = message_class(proto, "shop.v1.Order")
    value = cls(status=0, count=0)
    value.lines["k"].sku = "s"
    assert cls.FromString(value.SerializeToString()).lines["k"].sku == "s"
    assert cls.DESCRIPTOR.fields_by_name["count"].has_presence


def test_a_map_entry_is_named_as_protoc_names_it() -> None:
    text = 'syntax = "proto3";\nmessage M {\n  map<string, int32> tags = 1;\n'
    text += "  map<string, int32> by_long_name = 2;\n}\n"
    nested = unb64(to_serialized(text, {})).message_type[0].nested_type
    assert [m.name for m in nested] == ["TagsEntry", "ByLongNameEntry"]


def test_a_well_known_type_used_without_its_import_gets_the_dependency() -> None:
    """Confluent resolves well-known types without their import; a pool needs the file."""
    text = 'syntax = "proto3";\nmessage M {\n  google.protobuf.Timestamp at = 1;\n}\n'
    proto = unb64(to_serialized(text, {}))
    assert list(proto.dependency) == ["google/protobuf/timestamp.proto"]
    assert message_class(proto, "M").DESCRIPTOR.fields[0].message_type.full_name == (
        "google.protobuf.Timestamp"
    )


def test_references_resolve_type_names() -> None:
    common = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    text = 'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    text += "message Price { common.Money amount = 1; }\n"
    proto = unb64(to_serialized(text, {"common/money.proto": common}))
    assert list(proto.dependency) == ["common/money.proto"]
    assert proto.message_type[0].field[0].type_name == ".common.Money"
    assert proto.message_type[0].field[0].type == F.TYPE_MESSAGE
    with pytest.raises(InvalidSchema, match="common/money.proto"):
        to_serialized(text, {})


def test_a_file_with_imports_reads_with_its_references() -> None:
    """The serializer registers an imported file as a reference of its own (its text too is a
    descriptor) and the importing file names its types fully."""
    common = descriptor_pb2.FileDescriptorProto(
        name="common/money.proto", package="common", syntax="proto3"
    )
    common.message_type.add(name="Money").field.add(
        name="cents", number=1, label=OPTIONAL, type=F.TYPE_INT64
    )
    price = descriptor_pb2.FileDescriptorProto(
        name="shop/price.proto", package="shop", syntax="proto3", dependency=[common.name]
    )
    price.message_type.add(name="Price").field.add(
        name="amount", number=1, label=OPTIONAL, type=F.TYPE_MESSAGE, type_name=".common.Money"
    )
    cls = message_class(price, "shop.Price", common)
    common_text = to_text(_schema_to_str(cls.DESCRIPTOR.file.dependencies[0]))
    text = to_text(_schema_to_str(cls.DESCRIPTOR.file))
    assert 'import "common/money.proto";' in text
    assert "  .common.Money amount = 1;\n" in text
    references = {"common/money.proto": common_text}
    parse(Subject(KIND, text, references))
    served_common = to_serialized(common_text, {})
    common_again = _str_to_proto("common/money.proto", served_common)
    again = fetched(to_serialized(text, references), "default", common_again)
    assert list(shape(again.message_types_by_name.values())) == list(shape([cls.DESCRIPTOR]))


# --- proto2, options, Confluent's meta -------------------------------------------------------

PROTO2 = r"""syntax = "proto2";
package legacy;
import "confluent/meta.proto";
import public "google/protobuf/timestamp.proto";
option java_multiple_files = true;
option optimize_for = CODE_SIZE;
option (confluent.file_meta).doc = "the file";
message Old {
  option (confluent.message_meta) = { tags: ["A", "B"], params: [{key: "k", value: "v"}] };
  required int32 id = 1 [(confluent.field_meta).tags = "PII", (confluent.field_meta).doc = "id"];
  optional string s = 2 [default = "a\"b\n"];
  optional bytes b = 3 [default = "\001\377x"];
  optional Kind k = 4 [default = B];
  optional double d = 5 [default = inf, json_name = "dee"];
  repeated int32 ints = 6 [packed = true, deprecated = true];
  optional group Grp = 7 { optional int32 g = 1; }
  extensions 100 to max;
  reserved 20, 30 to 40;
  reserved "gone";
  enum Kind { option allow_alias = true; A = 0; B = 1; BB = 1 [deprecated = true]; reserved 5 to 9; }
  map<string, Old> children = 8;
  oneof choice { string c1 = 9; int32 c2 = 10; }
}
extend Old { optional string ext = 100; }
service Svc { rpc Get (Old) returns (stream google.protobuf.Timestamp) { option deprecated = true; } }
"""


def test_proto2_serializes_with_its_defaults_groups_extensions_and_services() -> None:
    proto = unb64(to_serialized(PROTO2, {}))
    assert proto.syntax == "proto2"
    assert list(proto.dependency) == ["confluent/meta.proto", "google/protobuf/timestamp.proto"]
    assert list(proto.public_dependency) == [1]
    assert proto.options.optimize_for == descriptor_pb2.FileOptions.CODE_SIZE
    cls = message_class(proto, "legacy.Old")
    fields = cls.DESCRIPTOR.fields_by_name
    assert fields["id"].is_required
    assert fields["grp"].type == F.TYPE_GROUP
    assert fields["d"].json_name == "dee"
    assert fields["ints"].GetOptions().packed and fields["ints"].GetOptions().deprecated
    value = cls()
    assert (value.s, value.b, value.k, value.d) == ('a"b\n', b"\x01\xffx", 1, float("inf"))
    assert cls.DESCRIPTOR.enum_types_by_name["Kind"].GetOptions().allow_alias
    old = proto.message_type[0]
    assert [(r.start, r.end) for r in old.reserved_range] == [(20, 21), (30, 41)]
    assert list(old.reserved_name) == ["gone"]
    assert [(r.start, r.end) for r in old.extension_range] == [(100, 536_870_912)]
    assert [(e.name, e.extendee) for e in proto.extension] == [("ext", ".legacy.Old")]
    method = proto.service[0].method[0]
    assert (method.input_type, method.output_type, method.server_streaming) == (
        ".legacy.Old",
        ".google.protobuf.Timestamp",
        True,
    )
    assert method.options.deprecated


def test_confluents_meta_options_carry_through_both_ways() -> None:
    served = to_serialized(PROTO2, {})
    cls = message_class(unb64(served), "legacy.Old")
    meta = cls.DESCRIPTOR.fields_by_name["id"].GetOptions().Extensions[meta_pb2.field_meta]
    assert (meta.doc, list(meta.tags)) == ("id", ["PII"])
    message_meta = cls.DESCRIPTOR.GetOptions().Extensions[meta_pb2.message_meta]
    assert (list(message_meta.tags), dict(message_meta.params)) == (["A", "B"], {"k": "v"})
    assert cls.DESCRIPTOR.file.GetOptions().Extensions[meta_pb2.file_meta].doc == "the file"
    text = to_text(_schema_to_str(cls.DESCRIPTOR.file))
    assert 'option (confluent.file_meta) = {\n  doc: "the file"\n};\n' in text
    assert '[(confluent.field_meta) = {\n    doc: "id",\n    tags: [\n      "PII"\n' in text


def test_proto2_reads_back_as_it_was_written() -> None:
    """Text to descriptor to text is stable, and the text says what the descriptor says."""
    text = to_text(to_serialized(PROTO2, {}))
    assert to_text(to_serialized(text, {})) == text
    for line in (
        "  required int32 id = 1 [(confluent.field_meta) = {\n",
        '  optional string s = 2 [default = "a\\"b\\n"];\n',
        "  optional .legacy.Old.Kind k = 4 [default = B];\n",
        "  optional group Grp = 7 {\n    optional int32 g = 1;\n  }\n",
        "  extensions 100 to max;\n",
        "  reserved 30 to 40;\n",
        "extend .legacy.Old {\n  optional string ext = 100;\n}\n",
        "  rpc Get (.legacy.Old) returns (stream .google.protobuf.Timestamp) {\n",
    ):
        assert line in text
    original = message_class(unb64(to_serialized(PROTO2, {})), "legacy.Old")
    again = fetched(to_serialized(text, {}))
    assert list(shape([again.message_types_by_name["Old"]])) == list(shape([original.DESCRIPTOR]))


def normalized(proto: Any) -> Any:
    """``proto`` with what a round trip may change dropped: its name, fields' order within a
    message, protoc's ``json_name``s and an explicit ``proto2`` syntax."""
    copy = descriptor_pb2.FileDescriptorProto.FromString(proto.SerializeToString())
    copy.ClearField("name")
    if copy.syntax == "proto2":
        copy.ClearField("syntax")

    def fields_by_number(messages: Any) -> None:
        for message in messages:
            ordered = sorted(message.field, key=lambda f: f.number)
            for f in ordered:
                f.ClearField("json_name")
            del message.field[:]
            message.field.extend(ordered)
            fields_by_number(message.nested_type)

    fields_by_number(copy.message_type)
    return copy


@pytest.mark.parametrize(
    "module",
    [
        "google.protobuf.descriptor_pb2",
        "google.protobuf.type_pb2",
        "google.protobuf.struct_pb2",
        "google.type.datetime_pb2",
        "confluent_kafka.schema_registry.confluent.meta_pb2",
        "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
    ],
)
def test_protocs_own_files_round_trip(module: str) -> None:
    """Files protoc compiled (descriptor.proto: proto2 defaults, options, extension ranges;
    meta.proto: maps and extends) come back the same, but for fields' order."""
    compiled = importlib.import_module(module).DESCRIPTOR
    original = descriptor_pb2.FileDescriptorProto.FromString(compiled.serialized_pb)
    again = unb64(to_serialized(to_text(_schema_to_str(compiled)), {}))
    assert normalized(again) == normalized(original)


# --- Refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(b"\xff\xff\xff\xff garbage").decode(),
        base64.b64encode(b"this is not a descriptor at all").decode(),
        "not base64 at all!",
        "",
    ],
)
def test_what_is_not_a_descriptor_is_an_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema, match="Could not parse Protobuf"):
        to_text(text)


def test_a_descriptor_the_text_cannot_say_is_an_invalid_schema() -> None:
    nameless = descriptor_pb2.FileDescriptorProto(syntax="proto3")
    nameless.message_type.add().field.add(name="a", number=1, type=F.TYPE_INT32)
    with pytest.raises(InvalidSchema, match="invalid message name ''"):
        to_text(b64(nameless))
    untyped = descriptor_pb2.FileDescriptorProto(syntax="proto3")
    untyped.message_type.add(name="M").field.add(name="a", number=1, type=F.TYPE_MESSAGE)
    with pytest.raises(InvalidSchema, match="invalid field 'a'"):
        to_text(b64(untyped))
    editions = descriptor_pb2.FileDescriptorProto(syntax="editions")
    with pytest.raises(InvalidSchema, match="unsupported syntax 'editions'"):
        to_text(b64(editions))


def test_an_undefined_type_is_an_invalid_schema() -> None:
    with pytest.raises(InvalidSchema, match="Nope"):
        to_serialized('syntax = "proto3";\nmessage M {\n  Nope n = 1;\n}\n', {})


# --- The real serializer and deserializer ----------------------------------------------------


class TextRegistry(MockSchemaRegistryClient):
    """confluent-kafka's mock registry keeping PROTOBUF schemas as ``.proto`` text, as a
    registry does: what clients register as descriptors is stored as :func:`to_text` makes it,
    and ``format=serialized`` answers with :func:`to_serialized`."""

    def __init__(self) -> None:
        super().__init__({"url": "mock://"})

    def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        return super().register_schema_full_response(subject_name, as_text(schema))

    def lookup_schema(
        self,
        subject_name: str,
        schema: Schema,
        normalize_schemas: bool = False,
        fmt: str | None = None,
        deleted: bool = False,
    ) -> RegisteredSchema:
        found = super().lookup_schema(subject_name, as_text(schema))
        return self.served(found, fmt)

    def get_schema(
        self,
        schema_id: int,
        subject_name: str | None = None,
        fmt: str | None = None,
        reference_format: str | None = None,
    ) -> Schema:
        return self.serve(super().get_schema(schema_id), fmt)

    def get_version(
        self,
        subject_name: str,
        version: Any = "latest",
        deleted: bool = False,
        fmt: str | None = None,
    ) -> RegisteredSchema:
        return self.served(super().get_version(subject_name, version), fmt)

    def served(self, registered: RegisteredSchema, fmt: str | None) -> RegisteredSchema:
        return RegisteredSchema(
            schema_id=registered.schema_id,
            guid=registered.guid,
            schema=self.serve(registered.schema, fmt),
            subject=registered.subject,
            version=registered.version,
        )

    def serve(self, schema: Schema, fmt: str | None) -> Schema:
        if fmt != "serialized":
            return schema
        served = to_serialized(schema.schema_str or "", self.references(schema))
        return Schema(served, schema.schema_type, schema.references)

    def references(self, schema: Schema) -> dict[str, str]:
        """The texts of ``schema``'s references and theirs, by import path."""
        found: dict[str, str] = {}
        for reference in schema.references or []:
            referenced = super().get_version(reference.subject, reference.version).schema
            found[reference.name] = referenced.schema_str
            found.update(self.references(referenced))
        return found


def as_text(schema: Schema) -> Schema:
    text = schema.schema_str or ""
    if looks_serialized(text):
        text = to_text(text)
    return Schema(text, schema.schema_type, schema.references)


class WriterTypes(ProtobufDeserializer):
    """The client's deserializer, noting the writer's type it finds by the message indexes."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.found: list[str] = []

    def _get_message_desc(self, pool: Any, fd: Any, msg_index: list[int]) -> Any:
        found = super()._get_message_desc(pool, fd, msg_index)
        self.found.append(found.full_name)
        return found


def test_the_clients_serializer_and_deserializer_work_through_the_texts() -> None:
    common = descriptor_pb2.FileDescriptorProto(
        name="common/money.proto", package="common", syntax="proto3"
    )
    common.message_type.add(name="Money").field.add(
        name="cents", number=1, label=OPTIONAL, type=F.TYPE_INT64
    )
    file = order_file()
    file.dependency.append(common.name)
    file.message_type[0].nested_type[1].field.add(
        name="price", number=3, label=OPTIONAL, type=F.TYPE_MESSAGE, type_name=".common.Money"
    )
    order = message_class(file, "shop.v1.Order", common)
    line = order.Line
    registry = TextRegistry()
    serializer = ProtobufSerializer(line, registry, {"auto.register.schemas": True})
    deserializer = WriterTypes(line, {}, registry)
    context = SerializationContext("orders", MessageField.VALUE)

    value = line(sku="x", qty=2)
    value.price.cents = 999
    data = serializer(value, context)
    assert data is not None and data[5:8] == b"\x04\x00\x02"  # message indexes [0, 1]
    assert deserializer(data, context) == value
    # the indexes found the writer's type in the descriptor served for the stored text
    assert deserializer.found[0] == "shop.v1.Order.Line"

    stored = registry.get_latest_version("orders-value").schema
    assert not looks_serialized(stored.schema_str)
    assert "  .common.Money price = 3;\n" in stored.schema_str
    assert [r.name for r in stored.references] == ["common/money.proto"]
    money = registry.get_latest_version("common/money.proto").schema.schema_str
    assert money.startswith('syntax = "proto3";\npackage common;\n')


def test_timestamps_need_no_reference() -> None:
    order = message_class(order_file(), "shop.v1.Order")
    registry = TextRegistry()
    serializer = ProtobufSerializer(order, registry, {"auto.register.schemas": True})
    deserializer = ProtobufDeserializer(order, {}, registry)
    context = SerializationContext("orders", MessageField.VALUE)
    value = order(id="o-1", tags={"a": "b"})
    value.placed_at.seconds = 5
    assert deserializer(serializer(value, context), context) == value
    assert registry.get_latest_version("orders-value").schema.references == []
