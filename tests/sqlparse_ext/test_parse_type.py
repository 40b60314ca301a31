"""parse_type: the catalog's canonical type text back to SqlType values."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import ParseError, parse_type
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    CustomType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BIGINT", PrimitiveType("BIGINT")),
        ("INT", PrimitiveType("INTEGER")),
        ("VARCHAR", PrimitiveType("STRING")),
        ("DECIMAL(4, 2)", DecimalType(4, 2)),
        ("ARRAY<STRING>", ArrayType(PrimitiveType("STRING"))),
        ("MAP<STRING, INTEGER>", MapType(PrimitiveType("STRING"), PrimitiveType("INTEGER"))),
        (
            "STRUCT<`a` INTEGER, B ARRAY<DOUBLE>>",
            StructType(
                (
                    StructField("a", PrimitiveType("INTEGER")),
                    StructField("B", ArrayType(PrimitiveType("DOUBLE"))),
                )
            ),
        ),
        ("ADDRESS", CustomType("ADDRESS")),
    ],
)
def test_parse_type_reads_canonical_text(text: str, expected: object) -> None:
    assert parse_type(text) == expected
    assert parse_type(parse_type(text).sql()) == expected


@pytest.mark.parametrize("text", ["", "NOT A TYPE", "INT) FROM X; DROP STREAM S", "DECIMAL(", "1"])
def test_parse_type_rejects_what_is_not_a_type(text: str) -> None:
    with pytest.raises(ParseError, match="not a type"):
        parse_type(text)
