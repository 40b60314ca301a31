"""The JSON, ARRAY/MAP, math, STRING/BYTES and date-time functions, through the expression compiler."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import Scope, compile_expression
from headwater.sqlparse_ext import parse_one, parse_type

TYPES = {
    "I": "INTEGER",
    "B": "BIGINT",
    "F": "DOUBLE",
    "D": "DECIMAL(4, 2)",
    "S": "STRING",
    "J": "STRING",
    "BY": "BYTES",
    "BO": "BOOLEAN",
    "AR": "ARRAY<INTEGER>",
    "SA": "ARRAY<STRING>",
    "AA": "ARRAY<ARRAY<STRING>>",
    "M": "MAP<STRING, INTEGER>",
    "ST": "STRUCT<`b` INTEGER, `A` STRING>",
    "DT": "DATE",
    "TM": "TIME",
    "TS": "TIMESTAMP",
    "N": "INTEGER",
    "NS": "STRING",
    "NA": "ARRAY<INTEGER>",
    "NM": "MAP<STRING, INTEGER>",
    "X": "STRING",
}
SCOPE = Scope({k: parse_type(v) for k, v in TYPES.items()}, frozenset({"T"}), {})
ROW = {
    "I": 7,
    "B": 10,
    "F": 2.5,
    "D": Decimal("-1.25"),
    "S": "hello world",
    "BY": b"!#",
    "J": '{"a": {"b": [1, 2.50, "x"]}, "c": null, "d": true}',
    "BO": True,
    "AR": [3, 1, None, 3],
    "SA": ["b", "a"],
    "AA": [["x"], ["y"], ["x"]],
    "M": {"k": 1, "j": 2},
    "ST": {"b": 1, "A": "z"},
    "DT": 10,
    "TM": 65_000,
    "TS": 1_589_234_313_000,
    "N": None,
    "NS": None,
    "NA": None,
    "NM": None,
    "X": "2003-12-24 10",
}


def compiled(text: str) -> Any:
    return compile_expression(parse_one(f"SELECT {text} FROM T;").query.select[0], SCOPE)


def ev(text: str) -> Any:
    return compiled(text).evaluate(ROW)


def check(cases: list[tuple[str, str, Any]]) -> None:
    for text, type_, value in cases:
        result = compiled(text)
        assert (text, str(result.type), result.evaluate(ROW)) == (text, type_, value)


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("TO_JSON_STRING(I)", "STRING", "7"),
        ("TO_JSON_STRING(N)", "STRING", "null"),
        ("TO_JSON_STRING(S)", "STRING", '"hello world"'),
        ("TO_JSON_STRING(F)", "STRING", "2.5"),
        ("TO_JSON_STRING(1.0e10)", "STRING", "1.0E10"),
        ("TO_JSON_STRING(D)", "STRING", "-1.25"),
        ("TO_JSON_STRING(BY)", "STRING", '"ISM="'),
        ("TO_JSON_STRING(TM)", "STRING", '"00:01:05"'),
        ("TO_JSON_STRING(DT)", "STRING", '"1970-01-11"'),
        ("TO_JSON_STRING(TS)", "STRING", '"2020-05-11T21:58:33.000"'),
        ("TO_JSON_STRING(ST)", "STRING", '{"A":"z","b":1}'),
        ("TO_JSON_STRING(M)", "STRING", '{"j":2,"k":1}'),
        ("TO_JSON_STRING(AR)", "STRING", "[3,1,null,3]"),
        ("TO_JSON_STRING('a\"\n')", "STRING", '"a\\"\\n"'),
        ("EXTRACTJSONFIELD(J, '$.a.b[1]')", "STRING", "2.50"),
        ("EXTRACTJSONFIELD(J, '$.a.b[2]')", "STRING", "x"),
        ("EXTRACTJSONFIELD(J, '$[\"a\"].b')", "STRING", '[1,2.50,"x"]'),
        ("EXTRACTJSONFIELD(J, '$.a.b[-1]')", "STRING", None),
        ("EXTRACTJSONFIELD(J, '$.c')", "STRING", "null"),
        ("EXTRACTJSONFIELD(J, '$.zz')", "STRING", None),
        ("EXTRACTJSONFIELD(X, '$.a')", "STRING", None),
        ("EXTRACTJSONFIELD('{\"a\": 1}}', '$.a')", "STRING", "1"),
        ("IS_JSON_STRING(J)", "BOOLEAN", True),
        ("IS_JSON_STRING('abc')", "BOOLEAN", False),
        ("IS_JSON_STRING('')", "BOOLEAN", False),
        ("IS_JSON_STRING(NS)", "BOOLEAN", False),
        ("JSON_ARRAY_LENGTH('[1, [2, 3]]')", "INTEGER", 2),
        ("JSON_ARRAY_LENGTH(J)", "INTEGER", None),
        ("JSON_ARRAY_CONTAINS('[1, \"a\", null]', 'a')", "BOOLEAN", True),
        ("JSON_ARRAY_CONTAINS('[1, 2]', 2)", "BOOLEAN", True),
        ("JSON_ARRAY_CONTAINS('[1.5]', 1)", "BOOLEAN", False),
        ("JSON_ARRAY_CONTAINS('[1.5]', 1.5e0)", "BOOLEAN", True),
        ("JSON_ARRAY_CONTAINS('[true]', 1)", "BOOLEAN", False),
        ("JSON_ARRAY_CONTAINS('[1, null]', NS)", "BOOLEAN", True),
        ("JSON_ARRAY_CONTAINS('{}', 1)", "BOOLEAN", False),
        ('JSON_CONCAT(\'{"a": 1}\', \'{"a": 2, "b": 3}\')', "STRING", '{"a":2,"b":3}'),
        ("JSON_CONCAT('[1]', '{\"a\": 1}', '4')", "STRING", '[1,{"a":1},4]'),
        ("JSON_CONCAT('null', 'null')", "STRING", "[null,null]"),
        ("JSON_CONCAT('[1]', NS)", "STRING", None),
        ("JSON_ITEMS('[{\"a\": 1}, 2]')", "ARRAY<STRING>", ['{"a":1}', "2"]),
        ("JSON_KEYS(J)", "ARRAY<STRING>", ["a", "c", "d"]),
        ("JSON_KEYS('[1]')", "ARRAY<STRING>", None),
        ('JSON_RECORDS(\'{"a": "x", "b": [1]}\')', "MAP<STRING, STRING>", {"a": "x", "b": "[1]"}),
    ],
)
def test_engine_functions_json(text: str, type_: str, value: Any) -> None:
    check([(text, type_, value)])


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("ARRAY_CONCAT(AR, ARRAY[9])", "ARRAY<INTEGER>", [3, 1, None, 3, 9]),
        ("ARRAY_CONCAT(NA, ARRAY[9])", "ARRAY<INTEGER>", [9]),
        ("ARRAY_CONCAT(NA, NA)", "ARRAY<INTEGER>", None),
        ("ARRAY_DISTINCT(AR)", "ARRAY<INTEGER>", [3, 1, None]),
        ("ARRAY_DISTINCT(AA)", "ARRAY<ARRAY<STRING>>", [["x"], ["y"]]),
        ("ARRAY_EXCEPT(AR, ARRAY[1])", "ARRAY<INTEGER>", [3, None]),
        ("ARRAY_INTERSECT(AR, ARRAY[1, 5])", "ARRAY<INTEGER>", [1]),
        ("ARRAY_UNION(AR, ARRAY[1, 5])", "ARRAY<INTEGER>", [3, 1, None, 5]),
        ("ARRAY_UNION(AR, NA)", "ARRAY<INTEGER>", None),
        ("ARRAY_CONTAINS(AR, 3)", "BOOLEAN", True),
        ("ARRAY_CONTAINS(AR, N)", "BOOLEAN", True),
        ("ARRAY_CONTAINS(NA, 3)", "BOOLEAN", False),
        ("ARRAY_REMOVE(AR, 3)", "ARRAY<INTEGER>", [1, None]),
        ("ARRAY_REMOVE(AR, N)", "ARRAY<INTEGER>", [3, 1, 3]),
        ("ARRAY_MAX(AR)", "INTEGER", 3),
        ("ARRAY_MIN(SA)", "STRING", "a"),
        ("ARRAY_MAX(ARRAY[N])", "INTEGER", None),
        ("ARRAY_SORT(AR)", "ARRAY<INTEGER>", [1, 3, 3, None]),
        ("ARRAY_SORT(AR, 'desc')", "ARRAY<INTEGER>", [3, 3, 1, None]),
        ("ARRAY_SORT(AR, 'sideways')", "ARRAY<INTEGER>", None),
        ("ARRAY_JOIN(AR)", "STRING", "3,1,null,3"),
        ("ARRAY_JOIN(SA, '|')", "STRING", "b|a"),
        ("ARRAY_JOIN(ARRAY[1.5e0, 1.0e7], NS)", "STRING", "1.51.0E7"),
        ("SLICE(AR, 2, 3)", "ARRAY<INTEGER>", [1, None]),
        ("SLICE(AR, N, 1)", "ARRAY<INTEGER>", [3]),
        ("SLICE(AR, 0, 1)", "ARRAY<INTEGER>", None),
        ("SLICE(AR, 2, 9)", "ARRAY<INTEGER>", None),
        (
            "ENTRIES(M, TRUE)",
            "ARRAY<STRUCT<`K` STRING, `V` INTEGER>>",
            [{"K": "j", "V": 2}, {"K": "k", "V": 1}],
        ),
        ("AS_MAP(SA, ARRAY[1])", "MAP<STRING, INTEGER>", {"b": 1, "a": None}),
        ("MAP_KEYS(M)", "ARRAY<STRING>", ["k", "j"]),
        ("MAP_VALUES(M)", "ARRAY<INTEGER>", [1, 2]),
        ("MAP_UNION(M, MAP('k' := 5))", "MAP<STRING, INTEGER>", {"k": 5, "j": 2}),
        ("MAP_UNION(NM, M)", "MAP<STRING, INTEGER>", {"k": 1, "j": 2}),
    ],
)
def test_engine_functions_arrays_and_maps(text: str, type_: str, value: Any) -> None:
    check([(text, type_, value)])


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("EXP(0)", "DOUBLE", 1.0),
        ("EXP(1000)", "DOUBLE", math.inf),
        ("LN(1)", "DOUBLE", 0.0),
        ("LN(0)", "DOUBLE", -math.inf),
        ("LOG(100)", "DOUBLE", math.log(100)),
        ("LOG(2, 8)", "DOUBLE", 3.0),
        ("LOG(1, 8)", "DOUBLE", "nan"),
        ("POWER(2, 10)", "DOUBLE", 1024.0),
        ("POWER(-8, 0.5e0)", "DOUBLE", "nan"),
        ("POWER(0, -1)", "DOUBLE", math.inf),
        ("CBRT(27)", "DOUBLE", 3.0),
        ("ACOS(2)", "DOUBLE", "nan"),
        ("COT(0)", "DOUBLE", math.inf),
        ("DEGREES(PI())", "DOUBLE", 180.0),
        ("RADIANS(180)", "DOUBLE", math.pi),
        ("SINH(N)", "DOUBLE", None),
        ("ATAN2(1, 1)", "DOUBLE", math.pi / 4),
        ("TRUNC(F)", "BIGINT", 2),
        ("TRUNC(-2.7e0)", "BIGINT", -2),
        ("TRUNC(I)", "BIGINT", 7),
        ("TRUNC(1.2345e0, 2)", "DOUBLE", 1.23),
        ("TRUNC(15.5e0, -1)", "DOUBLE", 10.0),
        ("TRUNC(D)", "DECIMAL(2, 0)", Decimal(-1)),
        ("TRUNC(D, 1)", "DECIMAL(4, 2)", Decimal("-1.20")),
        ("ROUND(D)", "DECIMAL(2, 0)", Decimal(-1)),
        ("ROUND(D, 1)", "DECIMAL(4, 2)", Decimal("-1.20")),
        ("ROUND(1.25e0, 1)", "DOUBLE", 1.3),
        ("ROUND(-1.25e0, 1)", "DOUBLE", -1.2),
        ("GEO_DISTANCE(37.4439, -122.1663, 51.5257, -0.1122)", "DOUBLE", 8634.659796579544),
        ("GEO_DISTANCE(37.4439, -122.1663, 51.5257, -0.1122, 'MI')", "DOUBLE", 5365.659729188262),
        ("GEO_DISTANCE(37.4439, -122.1663, 51.5257, -0.1122, NS)", "DOUBLE", 8634.659796579544),
        ("GEO_DISTANCE(F, F, F, N)", "DOUBLE", None),
    ],
)
def test_engine_functions_math(text: str, type_: str, value: Any) -> None:
    result = compiled(text)
    got = result.evaluate(ROW)
    assert str(result.type) == type_
    if value == "nan":
        assert math.isnan(got)
    else:
        assert got == (pytest.approx(value) if isinstance(value, float) else value)


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("TO_BYTES('1aB2', 'hex')", "BYTES", b"\x1a\xb2"),
        ("TO_BYTES('IQ==', 'base64')", "BYTES", b"!"),
        ("TO_BYTES('é', 'utf8')", "BYTES", "é".encode()),
        ("TO_BYTES('é', 'ascii')", "BYTES", b"?"),
        ("FROM_BYTES(BY, 'hex')", "STRING", "2123"),
        ("FROM_BYTES(BY, 'BASE64')", "STRING", "ISM="),
        ("FROM_BYTES(TO_BYTES('é', 'utf8'), 'ascii')", "STRING", "\ufffd\ufffd"),
        ("TO_BYTES(X, 'octal')", "BYTES", None),
        ("INT_FROM_BYTES(TO_BYTES('000007E5', 'hex'))", "INTEGER", 2021),
        ("INT_FROM_BYTES(TO_BYTES('E5070000', 'hex'), 'LITTLE_ENDIAN')", "INTEGER", 2021),
        ("BIGINT_FROM_BYTES(TO_BYTES('000000012A05F200', 'hex'))", "BIGINT", 5_000_000_000),
        ("INT_FROM_BYTES(BY)", "INTEGER", None),
        ("ENCODE('4578616d706C6521', 'hex', 'ascii')", "STRING", "Example!"),
        ("ENCODE('0x4578616d706C6521', 'hex', 'base64')", "STRING", "RXhhbXBsZSE="),
        ("ENCODE('Example!', 'ascii', 'hex')", "STRING", "4578616d706c6521"),
        ("ENCODE('RXhhbXBsZSE=', 'base64', 'utf8')", "STRING", "Example!"),
        ("ENCODE(X, 'base64', 'null')", "STRING", None),
        ("CHR(75)", "STRING", "K"),
        ("CHR(-1)", "STRING", None),
        ("CHR('\\u597d')", "STRING", "好"),
        ("CHR('K')", "STRING", None),
        ("CONCAT_WS('-', 'a', NS, 'b')", "STRING", "a-b"),
        ("CONCAT_WS(NS, 'a')", "STRING", None),
        ("ELT(2, 'a', S)", "STRING", "hello world"),
        ("ELT(3, 'a')", "STRING", None),
        ("FIELD('b', 'a', 'b')", "INTEGER", 2),
        ("FIELD(NS, 'a')", "INTEGER", 0),
        ("INITCAP('the   quICK br0wn')", "STRING", "The   Quick Br0wn"),
        ("MD5('a')", "STRING", "0cc175b9c0f1b6a831c399e269772661"),
        ("SPLIT_TO_MAP('a=1;b=2;c;;a=3', ';', '=')", "MAP<STRING, STRING>", {"a": "3", "b": "2"}),
        ("SPLIT_TO_MAP('a=1', '=', '=')", "MAP<STRING, STRING>", None),
        ("REGEXP_EXTRACT('(\\w+) (\\w+)', S, 2)", "STRING", "world"),
        ("REGEXP_EXTRACT('o.', S)", "STRING", "o "),
        ("REGEXP_EXTRACT('(x)', S, 2)", "STRING", None),
        ("REGEXP_EXTRACT_ALL('o.', S)", "ARRAY<STRING>", ["o ", "or"]),
        ("REGEXP_REPLACE(S, '(\\w+) (\\w+)', '$2 $1')", "STRING", "world hello"),
        ("REGEXP_REPLACE(S, 'o', '\\$')", "STRING", "hell$ w$rld"),
        ("REGEXP_REPLACE(S, '(', 'x')", "STRING", None),
        ("REGEXP_SPLIT_TO_ARRAY('a1b22c', '[0-9]+')", "ARRAY<STRING>", ["a", "b", "c"]),
        ("REGEXP_SPLIT_TO_ARRAY('1a1', '1')", "ARRAY<STRING>", ["", "a", ""]),
        ("REGEXP_SPLIT_TO_ARRAY('abc', '')", "ARRAY<STRING>", ["a", "b", "c"]),
        ("URL_ENCODE_PARAM('?foo $bar~')", "STRING", "%3Ffoo+%24bar%7E"),
        ("URL_DECODE_PARAM('%3Ffoo+%24bar')", "STRING", "?foo $bar"),
        ("URL_EXTRACT_HOST('http://user@Test.com:8080/p?q#f')", "STRING", "Test.com"),
        ("URL_EXTRACT_PORT('http://user@Test.com:8080/p?q#f')", "INTEGER", 8080),
        ("URL_EXTRACT_PORT('http://test.com/p')", "INTEGER", None),
        ("URL_EXTRACT_PATH('http://test.com/a%20b?q')", "STRING", "/a b"),
        ("URL_EXTRACT_PATH('http://test.com?q')", "STRING", ""),
        ("URL_EXTRACT_PROTOCOL('https://test.com')", "STRING", "https"),
        ("URL_EXTRACT_QUERY('http://test.com/?a=1&b')", "STRING", "a=1&b"),
        ("URL_EXTRACT_QUERY('http://test.com/#a?b')", "STRING", None),
        ("URL_EXTRACT_FRAGMENT('http://test.com/#frag')", "STRING", "frag"),
        ("URL_EXTRACT_PARAMETER('http://test.com/?a=1&b&c=x%20y', 'c')", "STRING", "x y"),
        ("URL_EXTRACT_PARAMETER('http://test.com/?a=1&b', 'b')", "STRING", ""),
        ("NULLIF(I, 7)", "INTEGER", None),
        ("NULLIF(I, 8)", "INTEGER", 7),
        ("NULLIF(I, N)", "INTEGER", 7),
    ],
)
def test_engine_functions_strings_and_bytes(text: str, type_: str, value: Any) -> None:
    check([(text, type_, value)])


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("STRINGTODATE('2018-05-11Lit', 'yyyy-MM-dd''Lit''')", "INTEGER", 17662),
        ("STRINGTODATE('01-Jan-2022', 'dd-MMM-yyyy')", "INTEGER", 18993),
        ("PARSE_DATE('01-JAN-2022', 'dd-MMM-yyyy')", "DATE", 18993),
        ("PARSE_DATE('2003-12-24-01-01', 'yyyy-MM-dd')", "DATE", 12410),
        ("PARSE_DATE(X, 'yyyy-MM-dd HH')", "DATE", None),
        ("PARSE_TIME('01:00:00 Pm', 'hh:mm:ss a')", "TIME", 46_800_000),
        ("PARSE_TIME(X, 'yyyy-MM-dd HH')", "TIME", None),
        ("FORMAT_DATE(DT, 'dd/MM/yyyy')", "STRING", "11/01/1970"),
        ("DATETOSTRING(-1, 'dd-MM-yyyy''x''')", "STRING", "31-12-1969x"),
        ("FORMAT_TIME(TM, 'HH_mm_ss_SSS')", "STRING", "00_01_05_000"),
        ("DATEADD(DAYS, 10, DT)", "DATE", 20),
        ("DATESUB(DAY, 11, DT)", "DATE", -1),
        ("DATEADD(MILLISECONDS, -1, DT)", "DATE", 9),
        ("DATEADD(HOURS, N, DT)", "DATE", None),
        ("TIMEADD(MILLISECONDS, -65001, TM)", "TIME", 86_399_999),
        ("TIMESUB(MINUTES, 1, TM)", "TIME", 5_000),
        ("TIMESTAMPADD(SECONDS, 2, TS)", "TIMESTAMP", 1_589_234_315_000),
        ("TIMESTAMPSUB(MILLISECOND, 1, TS)", "TIMESTAMP", 1_589_234_312_999),
        ("CONVERT_TZ(TS, '+0200', '+0500')", "TIMESTAMP", 1_589_245_113_000),
        (
            "CONVERT_TZ(TS, 'America/Los_Angeles', 'America/New_York')",
            "TIMESTAMP",
            1_589_245_113_000,
        ),
        ("CONVERT_TZ(TS, 'Nowhere/Land', 'UTC')", "TIMESTAMP", None),
        ("FROM_DAYS(-10)", "DATE", -10),
        ("FROM_UNIXTIME(B)", "TIMESTAMP", 10),
        ("UNIX_DATE(DT)", "INTEGER", 10),
        ("UNIX_TIMESTAMP(TS)", "BIGINT", 1_589_234_313_000),
    ],
)
def test_engine_functions_dates_and_times(text: str, type_: str, value: Any) -> None:
    check([(text, type_, value)])


def test_engine_functions_clock_calls_are_not_constants() -> None:
    now = compiled("UNIX_TIMESTAMP()")
    assert (str(now.type), now.constant) == ("BIGINT", False)
    assert now.evaluate({}) > 1_600_000_000_000
    assert compiled("UNIX_DATE()").evaluate({}) > 18_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "dateadd(DT, 5, DT)",
            "Function 'dateadd' does not accept parameters (DATE, INTEGER, DATE).",
        ),
        (
            "TIMEADD(DAYS, 1, DT)",
            "Function 'TIMEADD' does not accept parameters (INTERVAL UNIT, INTEGER, DATE).",
        ),
        (
            "ARRAY_SORT(M)",
            "Function 'ARRAY_SORT' does not accept parameters (MAP<STRING, INTEGER>).",
        ),
        (
            "ARRAY_MAX(AA)",
            "Function 'ARRAY_MAX' does not accept parameters (ARRAY<ARRAY<STRING>>).",
        ),
        (
            "ARRAY_CONTAINS(AR, 'x')",
            "Function 'ARRAY_CONTAINS' does not accept parameters (ARRAY<INTEGER>, STRING).",
        ),
        (
            "MAP_UNION(M, MAP('a' := 'b'))",
            "Function 'MAP_UNION' does not accept parameters (MAP<STRING, INTEGER>, MAP<STRING, STRING>).",
        ),
        ("EXTRACTJSONFIELD('{}', 'a.b')", "Invalid JSON path: 'a.b'"),
        (
            "GEO_DISTANCE(91, 0, 0, 0)",
            "valid latitude values for GeoDistance function are in the range of -90 to 90",
        ),
        ("TO_BYTES('zz', 'hex')", "Invalid hex string: zz"),
    ],
)
def test_engine_functions_errors(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as error:
        compiled(text)
    assert error.value.message == message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("CAST(ARRAY[1, 3] AS STRING)", "[1, 3]"),
        ("CAST(MAP('this' := 1) AS STRING)", "{this=1}"),
        ("CAST(MAP('b' := 1, 'a' := 2, 'zz' := 4) AS STRING)", "{zz=4, a=2, b=1}"),  # HashMap order
        (
            "CAST(STRUCT(F0 := 1, `f1` := CAST(NULL AS INT), G := 'x') AS STRING)",
            "Struct{F0=1,G=x}",
        ),
        ("CAST(ARRAY[1.5e0, NULL] AS STRING)", "[1.5, null]"),
    ],
)
def test_containers_cast_to_strings_as_java_prints_them(text: str, value: str) -> None:
    from headwater.engine.expressions import Scope, compile_expression
    from headwater.sqlparse_ext import parse_one

    node = parse_one(f"SELECT {text} FROM T;").query.select[0]
    assert compile_expression(node, Scope({}, frozenset({"T"}), {})).evaluate({}) == value
