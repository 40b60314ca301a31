"""Pull answers as ksqlDB's protobuf rows (``gateway.protobuf_rows``): the header's ``.proto`` text
is the one ksqlDB sends, and each row decodes, with that text alone, to the row's values."""

from __future__ import annotations

import base64
import math
from decimal import Decimal

import pytest
from google.protobuf import text_format

from headwater.engine.formats._proto_text import message_class
from headwater.gateway.errors import KsqlError
from headwater.gateway.protobuf_rows import ProtobufRows, protobuf_items, value_reader
from headwater.sqlparse_ext import parse_type

HEADERS = [
    ("MYKEY", "INTEGER"),
    ("MYVALUE", "INTEGER"),
    ("MYHEADERS", "ARRAY<STRUCT<`KEY` STRING, `VALUE` BYTES>>"),
]
# What ksqlDB's header carries for these columns (its pull-queries-protobuf.json test file).
HEADERS_PROTO = (
    'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  int32 MYKEY = 1;\n  int32 MYVALUE = 2;\n'
    "  repeated ConnectDefault2 MYHEADERS = 3;\n\n  message ConnectDefault2 {\n    string KEY = 1;\n"
    "    bytes VALUE = 2;\n  }\n}\n"
)


def _decoded(schema: str, row: dict) -> str:
    message = message_class(schema)()
    message.ParseFromString(base64.b64decode(row["row"]["protobufBytes"]))
    return text_format.MessageToString(message)


def test_the_header_carries_ksqldbs_proto_text_and_rows_decode_with_it() -> None:
    rows = [[10, 1, None], [11, 2, [{"KEY": "abc", "VALUE": base64.b64encode(b"!").decode()}]]]
    items = list(
        protobuf_items("q1", HEADERS, "`MYKEY` INTEGER KEY", iter(rows), "Query Completed")
    )
    header = items[0]["header"]
    assert header == {
        "queryId": "q1",
        "schema": "`MYKEY` INTEGER KEY",
        "protoSchema": HEADERS_PROTO,
    }
    assert _decoded(HEADERS_PROTO, items[1]) == "MYKEY: 10\nMYVALUE: 1\n"
    assert _decoded(HEADERS_PROTO, items[2]) == (
        'MYKEY: 11\nMYVALUE: 2\nMYHEADERS {\n  KEY: "abc"\n  VALUE: "!"\n}\n'
    )
    assert items[3] == {"finalMessage": "Query Completed"}


def test_a_map_is_written_as_key_value_entries() -> None:
    writer = ProtobufRows([("ID", "BIGINT"), ("M", "MAP<STRING, INTEGER>")])
    assert "repeated ConnectDefault2Entry M = 2;" in writer.schema
    text = _decoded(writer.schema, {"row": {"protobufBytes": writer.row([1, {"C": -1}])}})
    assert text == 'ID: 1\nM {\n  key: "C"\n  value: -1\n}\n'


@pytest.mark.parametrize(
    ("type_text", "shown", "value"),
    [
        ("BYTES", "AQI=", b"\x01\x02"),
        ("DATE", "2021-02-03", 18661),
        ("TIMESTAMP", "1970-01-01T00:00:01.500", 1500),
        ("DOUBLE", "NaN", None),
        ("DECIMAL(4, 2)", Decimal("1.50"), Decimal("1.50")),
        ("ARRAY<DATE>", ["1970-01-02"], [1]),
        ("STRUCT<`A` BYTES>", {"A": "AQI="}, {"A": b"\x01\x02"}),
    ],
)
def test_values_are_read_back_from_their_json_form(
    type_text: str, shown: object, value: object
) -> None:
    read = value_reader(parse_type(type_text))
    got = read(shown)
    if value is None:  # NaN
        assert math.isnan(got)
    else:
        assert got == value
    assert read(None) is None


def test_an_error_midway_ends_the_answer_with_an_error_item() -> None:
    def rows():
        yield [1, 1, None]
        raise KsqlError("the pull query ran out of its time budget", 40800, kind="generic_error")

    items = list(protobuf_items("q", HEADERS, "", rows(), "Query Completed"))
    assert "row" in items[1]
    assert "time budget" in items[2]["errorMessage"]["message"]
    assert len(items) == 3


def test_columns_protobuf_cannot_hold_are_refused_with_a_reason() -> None:
    with pytest.raises(KsqlError, match="cannot be written as protobuf rows"):
        ProtobufRows([("M", "MAP<INTEGER, STRING>")])
