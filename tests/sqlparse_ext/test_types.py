"""SqlType value objects: ksqlDB's names and spelling."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import (
    ArrayType,
    CustomType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_one,
)


def _type(sql_type: str):
    return parse_one(f"CREATE STREAM s (c {sql_type})").columns[0].type


@pytest.mark.parametrize(
    ("written", "sql"),
    [
        ("BOOLEAN", "BOOLEAN"),
        ("INT", "INTEGER"),
        ("integer", "INTEGER"),
        ("BIGINT", "BIGINT"),
        ("DOUBLE", "DOUBLE"),
        ("DECIMAL(10, 3)", "DECIMAL(10, 3)"),
        ("STRING", "STRING"),
        ("VARCHAR", "STRING"),
        ("VARCHAR(STRING)", "STRING"),
        ("BYTES", "BYTES"),
        ("DATE", "DATE"),
        ("TIME", "TIME"),
        ("TIMESTAMP", "TIMESTAMP"),
        ("ARRAY<ARRAY<INT>>", "ARRAY<ARRAY<INTEGER>>"),
        ("MAP<STRING, DOUBLE>", "MAP<STRING, DOUBLE>"),
        ("STRUCT<a INT, `B` STRUCT<c BYTES>>", "STRUCT<`A` INTEGER, `B` STRUCT<`C` BYTES>>"),
        ("STRUCT<>", "STRUCT<>"),
        ("address", "ADDRESS"),
        ("`Address`", "Address"),
    ],
)
def test_type_names(v, written, sql):
    sql_type = _type(written)
    assert sql_type.sql() == sql == str(sql_type)
    v.validate_identity(f"CREATE STREAM s (c {written})")


def test_type_values():
    assert _type("MAP<STRING, ARRAY<DECIMAL(2, 1)>>") == MapType(
        PrimitiveType("STRING"), ArrayType(DecimalType(2, 1))
    )
    assert _type("STRUCT<x address>") == StructType((StructField("X", CustomType("ADDRESS")),))
    assert hash(_type("ARRAY<INT>")) == hash(ArrayType(PrimitiveType("INTEGER")))


def test_cast_types(v):
    cast = v.validate_identity("SELECT CAST(x AS STRUCT<a BIGINT>) FROM s").query.select[0]
    assert cast.to.sql("headwater") == "STRUCT<a BIGINT>"
