"""JSON as columns: the vectorized reader and writer against the per-record ones, value by value."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.columnar.batch import to_column
from headwater.engine.columnar.json_columns import JsonObjects, json_fragments, json_objects
from headwater.engine.columnar.partitions import murmur2_many, partitions_of
from headwater.engine.formats import _json as jsonfmt
from headwater.engine.functions.types import BIGINT, BOOLEAN, DOUBLE, INTEGER, STRING
from headwater.engine.partitioner import murmur2, partition_for
from headwater.engine.values import format_decimal
from headwater.sqlparse_ext.sqltypes import DecimalType, SqlType


def _texts(values: list[Any], sql_type: SqlType) -> list[str]:
    column, wrong = to_column(values, sql_type)
    assert not wrong
    fragments, bad = json_fragments(column, sql_type)
    assert not bad
    return fragments.to_pylist()  # type: ignore[no-any-return]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats()), max_size=20))
def test_doubles_are_written_as_java_prints_them(values: list[float | None]) -> None:
    encode = jsonfmt.encoder(DOUBLE)
    assert _texts(values, DOUBLE) == [encode(v) for v in values]


def test_doubles_at_the_edges_of_the_plain_range() -> None:
    values = [1e-3, 0.000999, 1e7, 9999999.999999998, 75.0, -0.0, 0.0, 1e-320, 123.0, -1234567.5]
    assert _texts(values, DOUBLE) == [jsonfmt.encoder(DOUBLE)(v) for v in values]
    assert _texts([75.0, 1e7], DOUBLE) == ["75.0", "1.0E7"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=20))
def test_strings_are_escaped_as_the_per_record_writer_does(values: list[str | None]) -> None:
    values = [v for v in values if v is None or not any(0xD800 <= ord(c) < 0xE000 for c in v)]
    encode = jsonfmt.encoder(STRING)
    assert _texts(values, STRING) == [encode(v) for v in values]


@settings(deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=10),
    st.lists(st.one_of(st.none(), st.booleans()), max_size=10),
)
def test_integers_and_booleans(bigints: list[int | None], flags: list[bool | None]) -> None:
    assert _texts(bigints, BIGINT) == [jsonfmt.encoder(BIGINT)(v) for v in bigints]
    assert _texts(flags, BOOLEAN) == [jsonfmt.encoder(BOOLEAN)(v) for v in flags]


def test_a_lone_surrogate_is_a_bad_row_not_an_error() -> None:
    column, wrong = to_column(["ok", "\ud800", None], STRING)
    assert list(wrong) == [1]
    assert column.to_pylist() == ["ok", None, None]


def test_values_arrow_would_coerce_are_bad_rows() -> None:
    assert to_column([1, True], INTEGER)[1] == {1: "bool is not INTEGER"}
    assert list(to_column([0.0, False], DOUBLE)[1]) == [1]  # Arrow infers a double here
    assert list(to_column([1.5, 2], INTEGER)[1]) == [0]
    assert list(to_column([2**31], INTEGER)[1]) == [0]
    assert to_column([1, 2**40], DOUBLE)[0].to_pylist() == [1.0, float(2**40)]


def test_objects_are_written_as_the_per_record_encoder_writes_them() -> None:
    names = ["A", "É", 'q"']
    columns = [pa.array([1, None], pa.int32()), pa.array(["x", None]), pa.array([True, False])]
    types = [INTEGER, STRING, BOOLEAN]
    written = json_objects(names, [json_fragments(c, t)[0] for c, t in zip(columns, types)])
    encode = jsonfmt.object_encoder(tuple((n, jsonfmt.encoder(t)) for n, t in zip(names, types)))
    rows = [dict(zip(names, r)) for r in zip(*(c.to_pylist() for c in columns))]
    assert written.to_pylist() == [encode(r).encode() for r in rows]


def test_reading_objects_finds_fields_as_ksqldb_does() -> None:
    reader = JsonObjects([("ID", INTEGER), ("NAME", STRING), ("PRICE", DecimalType(6, 2))])
    values = [
        b'{"id": 1, "name": "a", "price": 1.5}',
        b'{"ID": "7", "Name": 12, "name": "low", "price": "2.25"}',
        b'{"id": true}',
        b"[1, 2]",
        b'{"id": 123456789012345678901234567890}',
        b'{"NAME": {"x": 1.10}}',
    ]
    columns, bad = reader.read(values)
    assert sorted(bad) == [2, 3, 4]
    assert columns["ID"].to_pylist() == [1, 7, None, None, None, None]
    assert columns["NAME"].to_pylist() == ["a", "low", None, None, None, '{"x":1.10}']
    prices = [None if p is None else format_decimal(p) for p in columns["PRICE"]]
    assert prices == ["1.50", "2.25", None, None, None, None]
    assert json.loads(values[0])["price"] == 1.5


@settings(deadline=None)
@given(st.lists(st.binary(max_size=13), max_size=40), st.integers(1, 64))
def test_keys_are_partitioned_as_kafka_partitions_them(keys: list[bytes], count: int) -> None:
    assert murmur2_many(keys).tolist() == [murmur2(k) & 0xFFFFFFFF for k in keys]
    assert partitions_of(keys, count) == [partition_for(k, count) for k in keys]
