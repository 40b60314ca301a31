"""PROTOBUF and PROTOBUF_NOSR: Kafka Connect's message layout, proto3's NULL rules, the wire header."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest
from headwater.engine.errors import SerdeError
from headwater.engine.schema_registry import MemorySchemaRegistry
from headwater.engine.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind


def pb_serde(*columns: str, fmt: str = "PROTOBUF", registry: MemorySchemaRegistry | None = None,
             **props: str) -> RowSerde:  # fmt: skip
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=rest.endswith(" KEY")))
    source = Source(SourceKind.STREAM, "S", tuple(cols), "orders", 1, "KAFKA", fmt,
                    tuple(sorted((k.upper(), v) for k, v in props.items())))  # fmt: skip
    return RowSerde.for_source(source, {}, registry)


COLUMNS = ("K STRING KEY", "I INTEGER", "S STRING", "D DECIMAL(4, 2)", "ST STRUCT<F0 INT>",
           "M MAP<STRING, DOUBLE>", "TS TIMESTAMP", "DA DATE", "TI TIME", "A ARRAY<BIGINT>")


def test_protobuf_round_trip_behind_the_wire_header() -> None:
    registry = MemorySchemaRegistry()
    serde = pb_serde(*COLUMNS, registry=registry)
    row = {"I": 5, "S": "x", "D": Decimal("-12.50"), "ST": {"F0": 1}, "M": {"k": 1.5},
           "TS": 1234567, "DA": 19000, "TI": 3723004, "A": [1, 2]}  # fmt: skip
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
        "I": 0, "S": "", "ST": None}  # a message can be absent; a scalar cannot
    for representation in ("OPTIONAL", "WRAPPER"):
        serde = pb_serde("I INTEGER", "S STRING", fmt="PROTOBUF_NOSR",
                         value_protobuf_nullable_representation=representation)  # fmt: skip
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
