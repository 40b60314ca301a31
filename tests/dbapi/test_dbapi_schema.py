"""Pure parts of the driver: the header schema parser, value conversion by type, and the
incremental decoder of streamed JSON arrays."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.dbapi import DataError, InterfaceError
from headwater.dbapi._convert import convert
from headwater.dbapi._jsonstream import JsonStreamError, iter_json_items
from headwater.dbapi._schema import Column, SqlType, parse_schema

STRING = SqlType("STRING")


def test_parse_schema_of_a_ksqldb_header() -> None:
    # Shape from ksqlDB docs, developer-guide/ksqldb-rest-api/query-endpoint.md (header.schema).
    columns = parse_schema(
        "`ID` STRING KEY, `NAME` STRING, `TOTAL` DECIMAL(10, 2), `TAGS` ARRAY<STRING>, "
        "`M` MAP<STRING, INTEGER>, `S` STRUCT<`A` INT, `B c` ARRAY<BIGINT>>, `ROWTIME` BIGINT"
    )
    assert [c.name for c in columns] == ["ID", "NAME", "TOTAL", "TAGS", "M", "S", "ROWTIME"]
    assert [c.key for c in columns] == [True] + [False] * 6
    assert [str(c.type) for c in columns] == [
        "STRING",
        "STRING",
        "DECIMAL(10, 2)",
        "ARRAY<STRING>",
        "MAP<STRING, INTEGER>",
        "STRUCT<`A` INT, `B c` ARRAY<BIGINT>>",
        "BIGINT",
    ]
    assert columns[2].type.params == (10, 2)
    assert columns[5].type.fields[1] == ("B c", SqlType("ARRAY", members=(SqlType("BIGINT"),)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("ID STRING", (Column("ID", STRING),)),
        ("`a``b` string primary key", (Column("a`b", STRING, key=True),)),
        ("`H` BYTES HEADER('k'), `X` STRING", (Column("H", SqlType("BYTES")), Column("X", STRING))),
        ("`S` STRUCT<>", (Column("S", SqlType("STRUCT")),)),
        ('"q" STRING', (Column("q", STRING),)),
    ],
)
def test_parse_schema_variants(text: str, expected: tuple[Column, ...]) -> None:
    assert parse_schema(text) == expected


@pytest.mark.parametrize(
    "text", ["`ID` ", "`ID STRING", "`X` DECIMAL(a, 2)", "`X` ARRAY<STRING", "`X` MAP<STRING,"]
)
def test_unreadable_schema_is_an_interface_error(text: str) -> None:
    with pytest.raises(InterfaceError):
        parse_schema(text)


def _t(text: str) -> SqlType:
    return parse_schema(f"`X` {text}")[0].type


@pytest.mark.parametrize(
    ("type_text", "value", "expected"),
    [
        ("BIGINT", 12, 12),
        ("INT", decimal.Decimal("3.0"), 3),
        ("DOUBLE", decimal.Decimal("2.5"), 2.5),
        ("DOUBLE", 3, 3.0),
        ("DECIMAL(4, 2)", decimal.Decimal("12.30"), decimal.Decimal("12.30")),
        ("DECIMAL(4, 2)", 12, decimal.Decimal(12)),
        ("DECIMAL(4, 2)", "12.30", decimal.Decimal("12.30")),
        ("BOOLEAN", True, True),
        ("STRING", "x", "x"),
        ("BYTES", "aGk=", b"hi"),
        ("DATE", "2024-05-01", datetime.date(2024, 5, 1)),
        ("DATE", 1, datetime.date(1970, 1, 2)),
        ("TIME", "12:30:00.123", datetime.time(12, 30, 0, 123000)),
        ("TIME", 3_600_000, datetime.time(1)),
        ("TIMESTAMP", "2024-05-01T12:30:00.000", datetime.datetime(2024, 5, 1, 12, 30)),
        ("TIMESTAMP", 86_400_000, datetime.datetime(1970, 1, 2)),
        (
            "TIMESTAMP",
            "2024-05-01T12:30:00+02:00",
            datetime.datetime(
                2024, 5, 1, 12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
            ),
        ),
        ("ARRAY<DECIMAL(3, 1)>", [decimal.Decimal("1.5"), None], [decimal.Decimal("1.5"), None]),
        ("MAP<STRING, BYTES>", {"k": "AA=="}, {"k": b"\x00"}),
        (
            "STRUCT<`A` DATE, `B` DOUBLE>",
            {"A": "2024-01-02", "B": decimal.Decimal("1.5"), "C": decimal.Decimal("2.5")},
            {"A": datetime.date(2024, 1, 2), "B": 1.5, "C": 2.5},
        ),
        ("GEOGRAPHY", {"x": [decimal.Decimal("0.5")]}, {"x": [0.5]}),
        ("STRING", None, None),
    ],
)
def test_convert_by_type(type_text: str, value: Any, expected: Any) -> None:
    result = convert(value, _t(type_text))
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("type_text", "value"),
    [("BYTES", "not base64!"), ("DATE", "May 1st"), ("DECIMAL(3, 1)", "abc"), ("TIME", "25:00")],
)
def test_values_that_do_not_fit_their_type_are_data_errors(type_text: str, value: Any) -> None:
    with pytest.raises(DataError, match=type_text.split("(")[0]):
        convert(value, _t(type_text))


ITEMS: list[Any] = [
    {"header": {"queryId": "q", "schema": "`A` DOUBLE"}},
    {"row": {"columns": [1.25]}},
    {"row": {"columns": ["x,]}{"]}},
    {"finalMessage": "Query Completed"},
]


def test_stream_decoder_reads_whole_and_decodes_floats_as_decimal() -> None:
    items = list(iter_json_items([json.dumps(ITEMS)]))
    assert items[1] == {"row": {"columns": [decimal.Decimal("1.25")]}}
    assert len(items) == 4


@settings(max_examples=200, derandomize=True)
@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=40))
def test_stream_decoder_is_indifferent_to_chunk_boundaries(sizes: list[int]) -> None:
    text = "[\n" + ",\n".join(json.dumps(i) for i in ITEMS) + "\n]\n"
    chunks, pos = [], 0
    for size in sizes * (len(text) // sum(sizes) + 1):
        chunks.append(text[pos : pos + size])
        pos += size
    assert "".join(chunks) == text
    assert list(iter_json_items(chunks)) == json.loads(text, parse_float=decimal.Decimal)


def test_stream_decoder_yields_each_item_as_soon_as_it_is_complete() -> None:
    seen: list[Any] = []

    def chunks() -> Any:
        yield '[{"a": 1},'
        assert seen == [{"a": 1}]  # the first item was handed out before more text was read
        yield ' {"b": 12'
        yield "3}]"

    for item in iter_json_items(chunks()):
        seen.append(item)  # noqa: PERF402 - the generator checks `seen` as it runs
    assert seen == [{"a": 1}, {"b": 123}]


def test_stream_decoder_accepts_values_not_wrapped_in_an_array() -> None:
    text = '{"header": {}}\n{"row": {"columns": [1]}},\n{"finalMessage": "done"}\n'
    assert [next(iter(i)) for i in iter_json_items([text])] == ["header", "row", "finalMessage"]
    assert list(iter_json_items(["[]"])) == []
    assert list(iter_json_items([""])) == []


@pytest.mark.parametrize("text", ['[{"a": 1}', '[{"a": }]', '[{"a": 1}] {"b": 2}', "[1, 2"])
def test_stream_decoder_refuses_broken_text(text: str) -> None:
    with pytest.raises(JsonStreamError):
        list(iter_json_items([text]))
