"""PROTOBUF and PROTOBUF_NOSR: Kafka Connect's message layout, proto3's NULL rules, the wire header."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from headwater.engine.errors import SerdeError
from headwater.engine.formats.schema_registry import MemorySchemaRegistry
from headwater.engine.formats.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind


def pb_serde(
    *columns: str, fmt: str = "PROTOBUF", registry: MemorySchemaRegistry | None = None, **props: str
) -> RowSerde:
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=rest.endswith(" KEY")))
    source = Source(
        SourceKind.STREAM,
        "S",
        tuple(cols),
        "orders",
        1,
        "KAFKA",
        fmt,
        tuple(sorted((k.upper(), v) for k, v in props.items())),
    )
    return RowSerde.for_source(source, {}, registry)


COLUMNS = (
    "K STRING KEY",
    "I INTEGER",
    "S STRING",
    "D DECIMAL(4, 2)",
    "ST STRUCT<F0 INT>",
    "M MAP<STRING, DOUBLE>",
    "TS TIMESTAMP",
    "DA DATE",
    "TI TIME",
    "A ARRAY<BIGINT>",
)


def test_protobuf_round_trip_behind_the_wire_header() -> None:
    registry = MemorySchemaRegistry()
    serde = pb_serde(*COLUMNS, registry=registry)
    row = {
        "I": 5,
        "S": "x",
        "D": Decimal("-12.50"),
        "ST": {"F0": 1},
        "M": {"k": 1.5},
        "TS": 1234567,
        "DA": 19000,
        "TI": 3723004,
        "A": [1, 2],
    }
    data = serde.serialize_value(row)
    assert data is not None
    schema_id, schema = registry.latest("orders-value")  # type: ignore[misc]
    assert data[:6] == struct.pack(">bI", 0, schema_id) + b"\x00"  # message indexes [0]
    assert schema.kind == "PROTOBUF" and "message ConnectDefault1 {" in schema.text
    assert "  confluent.type.Decimal D = 3;" in schema.text
    assert serde.deserialize_value(data) == row


def test_proto3_nulls_read_back_as_defaults_unless_optional_or_wrapped() -> None:
    registry = MemorySchemaRegistry()
    plain = pb_serde("I INTEGER", "S STRING", "ST STRUCT<F0 INT>", registry=registry)
    assert plain.deserialize_value(plain.serialize_value({"I": None})) == {
        "I": 0,
        "S": "",
        "ST": None,
    }  # a message can be absent; a scalar cannot
    for representation in ("OPTIONAL", "WRAPPER"):
        serde = pb_serde(
            "I INTEGER",
            "S STRING",
            fmt="PROTOBUF_NOSR",
            value_protobuf_nullable_representation=representation,
        )
        assert serde.deserialize_value(serde.serialize_value({"S": "a"})) == {"I": None, "S": "a"}


def test_protobuf_nosr_is_the_bare_message_and_errors_are_clear() -> None:
    serde = pb_serde("I INTEGER", fmt="PROTOBUF_NOSR")
    assert serde.serialize_value({"I": 1}) == b"\x08\x01"
    with pytest.raises(SerdeError, match="not a PROTOBUF message"):
        serde.deserialize_value(b"\xff\xff")
    with pytest.raises(SerdeError, match="MAP types with STRING keys"):
        pb_serde("M MAP<INT, STRING>", fmt="PROTOBUF_NOSR")
    with pytest.raises(SerdeError, match="does not support 'WRAP_SINGLE_VALUE' set to 'false'"):
        pb_serde("I INTEGER", fmt="PROTOBUF_NOSR", wrap_single_value="false")
    with pytest.raises(SerdeError, match="ksql.schema.registry.url"):
        pb_serde("I INTEGER").serialize_value({"I": 1})


WRITER = (
    'syntax = "proto3"; import "google/protobuf/wrappers.proto"; message ConfluentDefault1 {'
    "enum Suit {SPADES = 0; HEARTS = 1;} Suit c1 = 1; google.protobuf.Int32Value c2 = 2; "
    "message N {int32 f1 = 1;} N c3 = 3; map<string, int64> c4 = 4;}"
)


def test_records_of_another_writer_are_read_by_field_name() -> None:
    from headwater.engine.formats._proto_text import from_plain, message_class
    from headwater.engine.formats.schema_registry import RegisteredSchema

    registry = MemorySchemaRegistry()
    schema_id = registry.register("orders-value", RegisteredSchema("PROTOBUF", WRITER))
    written = from_plain(
        message_class(WRITER)(), {"c1": "HEARTS", "c2": 7, "c3": {"f1": 1}, "c4": {"a": 2}}
    )
    data = struct.pack(">bI", 0, schema_id) + b"\x00" + written.SerializeToString()
    serde = pb_serde(
        "C1 STRING",
        "C2 INTEGER",
        "C3 STRUCT<F1 INT>",
        "C4 MAP<STRING, BIGINT>",
        "C5 STRING",
        registry=registry,
    )
    assert serde.deserialize_value(data) == {
        "C1": "HEARTS",
        "C2": 7,
        "C3": {"F1": 1},
        "C4": {"a": 2},
        "C5": None,
    }


def test_columns_are_inferred_from_a_proto_schema() -> None:
    from headwater.engine.formats._proto_text import inferred_columns

    assert inferred_columns(WRITER, "ROWVAL") == (
        ("C1", "STRING"),
        ("C2", "INTEGER"),
        ("C3", "STRUCT<`F1` INTEGER>"),
        ("C4", "MAP<STRING, BIGINT>"),
    )
    with pytest.raises(SerdeError, match="schema references are not supported"):
        inferred_columns('syntax = "proto3"; import "other.proto"; message M {int32 a = 1;}', "V")


def test_a_map_is_written_in_key_order_whatever_the_order_it_was_built_in() -> None:
    """The same row gives the same bytes in every process (a replayed batch, another Spark worker):
    protobuf writes map entries in its hash order unless asked for deterministic output."""
    serde = pb_serde("K STRING KEY", "M MAP<STRING, DOUBLE>", fmt="PROTOBUF_NOSR")
    keys = [f"key{i}" for i in range(40)]
    forward = serde.serialize_value({"M": {k: 1.0 for k in keys}})
    backward = serde.serialize_value({"M": {k: 1.0 for k in reversed(keys)}})
    assert forward == backward
    assert forward is not None and forward.index(b"key0") < forward.index(b"key1")


def test_message_index_paths_round_trip_through_the_wire_bytes() -> None:
    from headwater.engine.formats._proto_text import index_bytes, message_class, message_index
    from headwater.engine.formats._protobuf import _varint

    text = (
        'syntax = "proto3"; message A {uint32 k1 = 1; message N { string x = 1; } } '
        "message B {string K1 = 1;}"
    )
    for name, path in (("A", (0,)), ("B", (1,)), ("A.N", (0, 0))):
        kind = message_class(text, name)
        assert message_index(kind.DESCRIPTOR) == path
        data = index_bytes(path)
        count, pos = _varint(data, 0)
        read = []
        for _ in range(count):
            step, pos = _varint(data, pos)
            read.append(step)
        assert (tuple(read) or (0,)) == path  # Confluent's reader: no indexes is the first message
        assert message_class(text, index=path).DESCRIPTOR.full_name == name


def test_the_written_schema_takes_the_sides_full_schema_name() -> None:
    """ksqlDB's ProtobufSchemaTranslator names the message after ``*_SCHEMA_FULL_NAME``: the
    package and the message; nested structs keep Connect's ``ConnectDefault<n>``, counted from 1;
    a name starting ``ConnectDefault`` is ignored, as ksqlDB ignores it."""
    registry = MemorySchemaRegistry()
    serde = pb_serde(
        "K STRING KEY",
        "I INTEGER",
        "ST STRUCT<F0 INT>",
        registry=registry,
        VALUE_SCHEMA_FULL_NAME="com.acme.Order",
    )
    data = serde.serialize_value({"I": 7, "ST": {"F0": 1}})
    assert data is not None
    text = registry.schema(struct.unpack(">bI", data[:5])[1]).text
    assert "package com.acme;" in text
    assert "message Order {" in text and "message ConnectDefault1 {" in text
    assert serde.deserialize_value(data) == {"I": 7, "ST": {"F0": 1}}
    default = pb_serde("V INT", registry=registry, VALUE_SCHEMA_FULL_NAME="ConnectDefault7")
    data = default.serialize_value({"V": 1})
    assert data is not None
    text = registry.schema(struct.unpack(">bI", data[:5])[1]).text
    assert "package" not in text and "message ConnectDefault1 {" in text
