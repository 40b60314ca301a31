"""The value model: check_value coercions and errors, ksqlDB's REST renderings, type resolution."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.errors import SerdeError
from headwater.engine.values import (
    check_value,
    format_date,
    format_time,
    format_timestamp,
    resolve_type,
    to_json_output,
)
from headwater.sqlparse_ext import PrimitiveType, parse_type
from headwater.sqlparse_ext.sqltypes import format_double, java_double_text


def t(text: str) -> Any:
    return parse_type(text)


@pytest.mark.parametrize(
    ("value", "type_text", "expected"),
    [
        (True, "BOOLEAN", True),
        (2**31 - 1, "INTEGER", 2**31 - 1),
        (-(2**63), "BIGINT", -(2**63)),
        (3, "DOUBLE", 3.0),
        (10, "DECIMAL(6, 4)", Decimal("10.0000")),
        (Decimal("1.005"), "DECIMAL(4, 2)", Decimal("1.01")),  # half up, as ksqlDB
        (Decimal("-1.005"), "DECIMAL(4, 2)", Decimal("-1.01")),
        (0.1, "DECIMAL(3, 2)", Decimal("0.10")),
        ("x", "STRING", "x"),
        (bytearray(b"\x00"), "BYTES", b"\x00"),
        (-10, "DATE", -10),
        (86_399_999, "TIME", 86_399_999),
        ((1, 2), "ARRAY<DOUBLE>", [1.0, 2.0]),
        ({"a": 1}, "MAP<STRING, BIGINT>", {"a": 1}),
        ({"B": 1}, "STRUCT<A INT, B INT>", {"A": None, "B": 1}),
        (None, "STRUCT<A INT>", None),
    ],
)
def test_check_value_coerces(value: Any, type_text: str, expected: Any) -> None:
    result = check_value(value, t(type_text), "C")
    assert result == expected
    assert type(result) is type(expected)
    if isinstance(expected, Decimal):
        assert result.as_tuple().exponent == expected.as_tuple().exponent


@pytest.mark.parametrize(
    ("value", "type_text", "message"),
    [
        (True, "INTEGER", "C: expected INTEGER, got boolean True"),
        (1, "BOOLEAN", "C: expected BOOLEAN, got integer 1"),
        (2**31, "INTEGER", "C: expected INTEGER, got integer 2147483648 (out of range"),
        (2**63, "BIGINT", "C: expected BIGINT, got integer"),
        ("1", "DOUBLE", "C: expected DOUBLE, got string '1'"),
        (False, "DOUBLE", "C: expected DOUBLE, got boolean False"),
        (Decimal(100), "DECIMAL(4, 2)", "must round to an absolute value less than 10^2"),
        (Decimal("NaN"), "DECIMAL(4, 2)", "not a finite number"),
        (math.inf, "DECIMAL(4, 2)", "not a finite number"),
        (b"x", "STRING", "C: expected STRING, got bytes b'x'"),
        (86_400_000, "TIME", "C: expected TIME"),
        ([1, "x"], "ARRAY<INT>", "C[1]: expected INTEGER, got string 'x'"),
        ({"a": "x"}, "MAP<STRING, INT>", "C['a']: expected INTEGER"),
        ({"A": {"F": 1.5}}, "STRUCT<A STRUCT<F INT>>", "C.A.F: expected INTEGER, got double 1.5"),
        ({"Z": 1}, "STRUCT<A INT>", "unknown field 'Z'"),
        ("x", "STRUCT<A INT>", "C: expected STRUCT<`A` INTEGER>, got string 'x'"),
    ],
)
def test_check_value_rejects(value: Any, type_text: str, message: str) -> None:
    with pytest.raises(SerdeError, match=re.escape(message)) as info:
        check_value(value, t(type_text), "C")
    assert info.value.error_code == 40001


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (123.456, "123.456"),
        (9876.54321, "9876.54321"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (0.001, "0.001"),
        (0.000999, "9.99E-4"),
        (1.5e-4, "1.5E-4"),
        (-2.5e20, "-2.5E20"),
        (22026.465794806718, "22026.465794806718"),
        # one shortest digit: Java writes the nearest two-digit decimal that rounds to x
        (5e-324, "4.9E-324"),
        (1e-323, "9.9E-324"),
        (1e23, "1.0E23"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_format_double_is_java_double_to_string(value: float, text: str) -> None:
    assert format_double(value) == text
    if math.isfinite(value):
        assert java_double_text(value) == text


@settings(max_examples=2000, derandomize=True, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(1e-3, 1e7)
    | st.sampled_from([1e-3, 1e7, 9999999.999999998, 0.0009999999999999998, -0.0])
)
def test_the_fast_path_of_format_double_writes_what_the_digits_give(value: float) -> None:
    """Between 1e-3 and 1e7 `format_double` is Python's repr: the same text, digit by digit."""
    assert format_double(value) == java_double_text(value)


def test_date_time_timestamp_renderings() -> None:
    assert format_date(0) == "1970-01-01"
    assert format_date(-10) == "1969-12-22"
    assert format_date(18_628) == "2021-01-01"
    assert format_date(2_932_897) == "+10000-01-01"
    assert format_time(0) == "00:00"  # java.time's LocalTime.toString drops zero seconds
    assert format_time(45_296_789) == "12:34:56"  # and ksqlDB drops the milliseconds
    assert format_timestamp(1_609_459_200_000) == "2021-01-01T00:00:00.000"
    assert format_timestamp(-1) == "1969-12-31T23:59:59.999"


def test_to_json_output_renders_like_ksqldb_rest() -> None:
    row_type = t(
        "STRUCT<D DECIMAL(4, 2), B BYTES, DT DATE, TM TIME, TS TIMESTAMP, "
        "A ARRAY<DATE>, M MAP<STRING, BYTES>, N STRING>"
    )
    value = {
        "D": Decimal("1.50"),
        "B": b"\x01\x02",
        "DT": 1,
        "TM": 3_723_000,
        "TS": 0,
        "A": [0, None],
        "M": {"k": b"a"},
        "N": None,
    }
    assert to_json_output(value, row_type) == {
        "D": Decimal("1.50"),
        "B": "AQI=",
        "DT": "1970-01-02",
        "TM": "01:02:03",
        "TS": "1970-01-01T00:00:00.000",
        "A": ["1970-01-01", None],
        "M": {"k": "YQ=="},
        "N": None,
    }
    assert to_json_output(None, PrimitiveType("BYTES")) is None
    assert to_json_output(1.5, PrimitiveType("DOUBLE")) == 1.5


def test_resolve_type_expands_custom_types_recursively() -> None:
    custom = {"ADDRESS": "STRUCT<`City` STRING, ZIP ZIPCODE>", "ZIPCODE": "INTEGER"}
    resolved = resolve_type("ARRAY<ADDRESS>", custom)
    assert resolved == t("ARRAY<STRUCT<`City` STRING, ZIP INTEGER>>")
    assert resolve_type(t("MAP<STRING, ZIPCODE>"), custom) == t("MAP<STRING, INTEGER>")


def test_resolve_type_accepts_catalog_custom_types() -> None:
    from headwater.metastore.catalog import CustomType

    assert resolve_type("Z", {"Z": CustomType("Z", "BIGINT")}) == PrimitiveType("BIGINT")


@pytest.mark.parametrize(
    ("text", "custom", "message"),
    [
        ("NOPE", {}, "unknown type: NOPE"),
        ("A", {"A": "ARRAY<B>", "B": "A"}, "custom type A refers to itself: A -> B"),
        ("MAP<", {}, "not a type: 'MAP<'"),
    ],
)
def test_resolve_type_errors(text: str, custom: dict[str, str], message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        resolve_type(text, custom)
