"""The AVRO format: ksqlDB's schemas, Confluent's wire header, reading with the writer's schema."""

from __future__ import annotations

import io
import json
import struct
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from headwater.engine.errors import SerdeError
from headwater.engine.formats import schema_registry
from headwater.engine.formats._avro import avro_schema
from headwater.engine.formats.schema_registry import MemorySchemaRegistry, RegisteredSchema
from headwater.engine.formats.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.sqlparse_ext import parse_type


def avro_serde(
    *columns: str, registry: MemorySchemaRegistry | None, key_format: str = "AVRO", **props: Any
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
        key_format,
        "AVRO",
        tuple(sorted((k.upper(), v) for k, v in props.items())),
    )
    return RowSerde.for_source(source, {}, registry)


def record(schema: Any, datum: Any, schema_id: int) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def test_ksqldb_schema_of_the_columns() -> None:
    columns = [
        ("ID", parse_type("BIGINT")),
        ("PRICE", parse_type("DECIMAL(4, 2)")),
        ("ADDRESS", parse_type("STRUCT<CITY STRING>")),
        ("TAGS", parse_type("ARRAY<INT>")),
        ("AT", parse_type("TIMESTAMP")),
    ]
    schema = avro_schema(columns, unwrapped=False)
    assert schema["name"] == "KsqlDataSourceSchema"
    assert schema["namespace"] == "io.confluent.ksql.avro_schemas"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["ID"] == {"name": "ID", "type": ["null", "long"], "default": None}
    price = fields["PRICE"]["type"][1]
    assert (price["type"], price["logicalType"], price["precision"], price["scale"]) == (
        "bytes",
        "decimal",
        4,
        2,
    )
    assert fields["ADDRESS"]["type"][1]["name"] == "KsqlDataSourceSchema_ADDRESS"
    assert fields["TAGS"]["type"][1] == {"type": "array", "items": ["null", "int"]}
    assert fields["AT"]["type"][1] == {"type": "long", "logicalType": "timestamp-millis"}
    assert avro_schema([("K", parse_type("STRING"))], unwrapped=True) == ["null", "string"]


def test_round_trip_registers_the_schema_once() -> None:
    registry = MemorySchemaRegistry()
    serde = avro_serde(
        "K STRING KEY",
        "ID BIGINT",
        "PRICE DECIMAL(4, 2)",
        "DAY DATE",
        "ADDRESS STRUCT<CITY STRING>",
        "TAGS MAP<STRING, INT>",
        registry=registry,
    )
    row = {
        "ID": 7,
        "PRICE": Decimal("12.50"),
        "DAY": 19000,
        "ADDRESS": {"CITY": "Oslo"},
        "TAGS": {"a": 1},
    }
    data = serde.serialize_value(row)
    assert data is not None and data[0] == 0
    assert serde.deserialize_value(data) == row
    assert serde.deserialize_value(serde.serialize_value({"ID": None})) == {
        "ID": None,
        "PRICE": None,
        "DAY": None,
        "ADDRESS": None,
        "TAGS": None,
    }
    key = serde.serialize_key(("k1",))
    assert serde.deserialize_key(key) == ("k1",)
    assert registry.subjects() == ["orders-key", "orders-value"]
    value_id, value_schema = registry.latest("orders-value")  # type: ignore[misc]
    assert struct.unpack(">bI", data[:5]) == (0, value_id)
    assert json.loads(value_schema.text)["name"] == "KsqlDataSourceSchema"


def test_reads_with_the_writers_schema_by_name_and_coerces() -> None:
    registry = MemorySchemaRegistry()
    writer = {
        "type": "record",
        "name": "blah",
        "fields": [
            {"name": "c1", "type": "float"},
            {
                "name": "suit",
                "type": {"type": "enum", "name": "Suit", "symbols": ["SPADES", "HEARTS"]},
            },
            {"name": "n", "type": "int"},
            {"name": "extra", "type": "string"},
        ],
    }
    schema_id = registry.register("orders-value", RegisteredSchema("AVRO", json.dumps(writer)))
    serde = avro_serde(
        "C1 DOUBLE", "SUIT STRING", "N STRING", "MISSING INT", key_format="KAFKA", registry=registry
    )
    data = record(writer, {"c1": 4.0, "suit": "HEARTS", "n": 10, "extra": "x"}, schema_id)
    assert serde.deserialize_value(data) == {
        "C1": 4.0,
        "SUIT": "HEARTS",
        "N": "10",
        "MISSING": None,
    }


def test_an_anonymous_value_with_wrap_single_value_false() -> None:
    registry = MemorySchemaRegistry()
    schema_id = registry.register("orders-value", RegisteredSchema("AVRO", '"int"'))
    serde = avro_serde("FOO INT", key_format="KAFKA", registry=registry, wrap_single_value=False)
    assert serde.deserialize_value(record("int", 10, schema_id)) == {"FOO": 10}
    assert serde.deserialize_value(serde.serialize_value({"FOO": 3})) == {"FOO": 3}


def test_bad_bytes_and_a_missing_registry_are_clear_errors() -> None:
    registry = MemorySchemaRegistry()
    serde = avro_serde("ID INT", key_format="KAFKA", registry=registry)
    with pytest.raises(SerdeError, match="Unknown magic byte"):
        serde.deserialize_value(b'{"ID": 1}')
    with pytest.raises(SerdeError, match="Schema 42 not found"):
        serde.deserialize_value(struct.pack(">bI", 0, 42) + b"\x02")
    schema_id = registry.register("orders-value", RegisteredSchema("AVRO", '"string"'))
    with pytest.raises(SerdeError, match="cannot read str as INTEGER"):
        serde.deserialize_value(record("string", "x", schema_id))
    without = avro_serde("ID INT", key_format="KAFKA", registry=None)
    with pytest.raises(SerdeError, match="ksql.schema.registry.url"):
        without.serialize_value({"ID": 1})


def test_the_process_registry_is_the_default() -> None:
    registry = MemorySchemaRegistry()
    schema_registry.use(registry)
    try:
        serde = avro_serde("ID INT", key_format="KAFKA", registry=None)
        assert serde.deserialize_value(serde.serialize_value({"ID": 5})) == {"ID": 5}
    finally:
        schema_registry.use(None)
    assert schema_registry.from_url("") is None
    assert isinstance(schema_registry.from_url("mock://x"), MemorySchemaRegistry)


def test_columns_are_inferred_from_the_registered_schema() -> None:
    from headwater.engine.formats._avro import inferred_columns
    from headwater.engine.formats.schema_inference import schema_facts
    from headwater.sqlparse_ext import parse_one

    writer = {
        "type": "record",
        "name": "blah",
        "fields": [
            {
                "name": "c1",
                "type": {"type": "record", "name": "x", "fields": [{"name": "f1", "type": "int"}]},
            },
            {
                "name": "amount",
                "type": [
                    "null",
                    {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
                ],
            },
            {"name": "tags", "type": {"type": "map", "values": "long"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    assert inferred_columns(json.dumps(writer), "ROWVAL") == (
        ("C1", "STRUCT<`F1` INTEGER>"),
        ("AMOUNT", "DECIMAL(4, 2)"),
        ("TAGS", "MAP<STRING, BIGINT>"),
        ("AT", "TIMESTAMP"),
    )
    assert inferred_columns('"int"', "ROWKEY") == (("ROWKEY", "INTEGER"),)
    with pytest.raises(SerdeError, match="cannot infer"):
        inferred_columns('["int", "string"]', "ROWVAL")

    registry = MemorySchemaRegistry()
    registry.register("t-value", RegisteredSchema("AVRO", json.dumps(writer)))
    registry.register("t-key", RegisteredSchema("AVRO", '"string"'))
    statement = parse_one("CREATE STREAM s WITH (kafka_topic='t', format='AVRO');")
    facts = schema_facts(statement, registry)
    assert facts is not None and facts["t-key"] == (("ROWKEY", "STRING"),)
    assert facts["t-value"][0] == ("C1", "STRUCT<`F1` INTEGER>")
    assert schema_facts(statement, None) is None


def test_json_sr_writes_the_header_and_reads_with_or_without_it() -> None:
    registry = MemorySchemaRegistry()
    cols = (Column("K", "STRING", key=True), Column("ID", "BIGINT"), Column("D", "DECIMAL(4, 2)"))
    source = Source(SourceKind.STREAM, "S", cols, "orders", 1, "KAFKA", "JSON_SR", ())
    serde = RowSerde.for_source(source, {}, registry)
    data = serde.serialize_value({"ID": 7, "D": Decimal("1.50")})
    assert data is not None
    schema_id, schema = registry.latest("orders-value")  # type: ignore[misc]
    assert data[:5] == struct.pack(">bI", 0, schema_id) and json.loads(data[5:]) == {
        "ID": 7,
        "D": 1.5,
    }
    assert json.loads(schema.text)["properties"]["ID"]["oneOf"][1]["connect.type"] == "int64"
    assert serde.deserialize_value(data) == {"ID": 7, "D": Decimal("1.50")}
    assert serde.deserialize_value(b'{"ID": 8}') == {"ID": 8, "D": None}


def test_json_sr_columns_are_inferred_keeping_their_case() -> None:
    from headwater.engine.formats._json_sr import inferred_columns

    schema = {
        "type": "object",
        "properties": {
            "c1": {"type": "integer", "connect.type": "int32"},
            "c2": {"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "string"}}]},
        },
    }
    assert inferred_columns(json.dumps(schema), "ROWVAL") == (
        ("c1", "INTEGER"),
        ("c2", "ARRAY<STRING>"),
    )
    assert inferred_columns('{"type": "boolean"}', "ROWKEY") == (("ROWKEY", "BOOLEAN"),)


def test_values_conform_to_a_registered_schema_they_were_not_made_for() -> None:
    from headwater.engine.formats._avro import conformed

    schema = {
        "type": "record",
        "name": "T",
        "fields": [
            {"name": "eventID", "type": "string"},
            {"name": "opt", "type": "string", "default": "foo"},
            {
                "name": "tx",
                "type": {
                    "type": "record",
                    "name": "Tx",
                    "fields": [
                        {"name": "amount", "type": "int", "default": 0},
                        {"name": "note", "type": ["null", "string"], "default": None},
                    ],
                },
            },
            {"name": "more", "type": {"type": "array", "items": "Tx"}},
        ],
    }
    value = {"EVENTID": "1", "tx": {"amount": None}, "more": [{"AMOUNT": 5}]}
    assert conformed(schema, value, {}) == {
        "eventID": "1",  # found ignoring case
        "opt": "foo",  # not given: its default
        "tx": {"amount": 0, "note": None},  # NULL where a default exists: the default
        "more": [{"amount": 5, "note": None}],  # a named type met before
    }


def test_a_serde_registers_its_schemas_when_asked_as_its_first_write_would() -> None:
    from headwater.engine.formats.serde import RowSerde
    from headwater.metastore.catalog import Column, Source, SourceKind

    registry = schema_registry.MemorySchemaRegistry()
    source = Source(
        SourceKind.STREAM,
        "S",
        (Column("K", "INTEGER", True), Column("V", "STRING")),
        topic="t",
        partitions=1,
        key_format="KAFKA",
        value_format="AVRO",
    )
    serde = RowSerde.for_source(source, {}, registry)
    serde.register_schemas()
    assert registry.latest("t-value") is not None and registry.latest("t-key") is None
    first = serde.serialize_value({"V": "x"})
    assert first is not None and first[1:5] == (1).to_bytes(4, "big")  # the same schema, id 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("1Field", "Illegal initial character: 1Field"),
        ("a-b", "Illegal character in: a-b"),
    ],
)
def test_column_names_avro_cannot_hold_are_refused_in_ksqldbs_words(
    name: str, message: str
) -> None:
    from headwater.engine.errors import SerdeError
    from headwater.engine.formats._avro import avro_schema
    from headwater.sqlparse_ext import parse_type

    with pytest.raises(SerdeError, match=f"Schema is not compatible with Avro: {message}"):
        avro_schema([(name, parse_type("INTEGER")), ("B", parse_type("INTEGER"))], False)
    avro_schema([("_ok_1", parse_type("INTEGER"))], False)


def test_the_written_schema_takes_the_sides_full_schema_name() -> None:
    """ksqlDB names the schema it registers after ``*_SCHEMA_FULL_NAME`` (AvroSchemas): the
    record in its namespace, nested records after their path; the value's legacy
    ``VALUE_AVRO_SCHEMA_FULL_NAME`` too. A schema named otherwise would be a new, incompatible
    version of the user's subject."""
    registry = MemorySchemaRegistry()
    serde = avro_serde(
        "K STRING KEY",
        "ADDR STRUCT<CITY STRING>",
        registry=registry,
        VALUE_SCHEMA_FULL_NAME="com.acme.Order",
        KEY_SCHEMA_FULL_NAME="OrderKey",
        KEY_FORMAT="AVRO",
    )
    data = serde.serialize_value({"ADDR": {"CITY": "Oslo"}})
    assert data is not None
    written = json.loads(registry.schema(struct.unpack(">bI", data[:5])[1]).text)
    assert (written["name"], written["namespace"]) == ("Order", "com.acme")
    nested = written["fields"][0]["type"][1]
    assert (nested["name"], nested["namespace"]) == ("Order_ADDR", "com.acme")
    assert serde.deserialize_value(data) == {"ADDR": {"CITY": "Oslo"}}
    legacy = avro_serde("V INT", registry=registry, VALUE_AVRO_SCHEMA_FULL_NAME="a.b.Legacy")
    data = legacy.serialize_value({"V": 1})
    assert data is not None
    assert json.loads(registry.schema(struct.unpack(">bI", data[:5])[1]).text)["name"] == "Legacy"


def test_a_source_whose_columns_are_the_subjects_writes_with_the_subjects_schema() -> None:
    """A stream whose columns were taken from the subject's newest schema writes its records with
    that schema (as the topic's producers do) instead of registering ksqlDB's record under the
    user's subject, which a BACKWARD registry would refuse (the record's name differs); a row that
    schema cannot hold (NULL in a required field) falls back to the side's own schema."""
    registry = MemorySchemaRegistry()
    users = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "ID", "type": "int"}, {"name": "ITEM", "type": "string"}],
    }
    given = registry.register("orders-value", RegisteredSchema("AVRO", json.dumps(users)))
    serde = avro_serde(
        "K STRING KEY", "ID INTEGER", "ITEM STRING", registry=registry, key_format="KAFKA"
    )
    data = serde.serialize_value({"ID": 1, "ITEM": "tea"})
    assert data is not None and struct.unpack(">bI", data[:5])[1] == given
    assert registry.subjects() == ["orders-value"]
    assert serde.deserialize_value(data) == {"ID": 1, "ITEM": "tea"}
    data = serde.serialize_value({"ID": None, "ITEM": "tea"})
    assert data is not None and struct.unpack(">bI", data[:5])[1] != given
    assert serde.deserialize_value(data) == {"ID": None, "ITEM": "tea"}
