"""ksqlDB's coercion of user lists (engine.coercion): IN lists, ARRAY and MAP constructors share one
type, found in order; literals convert under the lax rules, expressions under the strict ones."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.coercion import can_coerce, decimal_type_of, parse_boolean_exact
from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import Scope, compile_expression
from headwater.engine.functions.types import BIGINT, DOUBLE, INTEGER, STRING
from headwater.sqlparse_ext import parse_one, parse_type
from headwater.sqlparse_ext.sqltypes import ArrayType, DecimalType, StructField, StructType

TYPES = {
    "I": "INTEGER",
    "B": "BIGINT",
    "F": "DOUBLE",
    "D": "DECIMAL(4, 2)",
    "S": "STRING",
    "BO": "BOOLEAN",
    "AI": "ARRAY<INTEGER>",
    "AB": "ARRAY<BIGINT>",
    "SI": "STRUCT<`F0` INTEGER>",
}
SCOPE = Scope({k: parse_type(v) for k, v in TYPES.items()}, frozenset({"T"}), {})
ROW: dict[str, Any] = {
    "I": 4,
    "B": 2**31,
    "F": 11.01,
    "D": Decimal("11.01"),
    "S": "x",
    "BO": True,
    "AI": [1, 2],
    "AB": [1, 2],
    "SI": {"F0": 10},
}


def compiled(text: str) -> Any:
    return compile_expression(parse_one(f"SELECT {text} FROM T;").query.select[0], SCOPE)


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("ARRAY[10, 11.2, 13.00, '14.1230']", "ARRAY<DECIMAL(14, 4)>", None),
        ("ARRAY[1, B]", "ARRAY<BIGINT>", [1, 2**31]),
        (
            "ARRAY[NULL, 10, '2e1', I, B]",
            "ARRAY<DECIMAL(19, 0)>",
            [None, Decimal(10), Decimal(20), Decimal(4), Decimal(2**31)],
        ),
        ("ARRAY[1, 2.5]", "ARRAY<DECIMAL(11, 1)>", [Decimal("1.0"), Decimal("2.5")]),
        ("ARRAY['a', 1, true]", "ARRAY<STRING>", ["a", "1", "true"]),
        (
            "ARRAY[STRUCT(X := I), STRUCT(Y := 1)]",
            "ARRAY<STRUCT<`Y` INTEGER, `X` INTEGER>>",  # the later element's fields first
            [{"X": 4, "Y": None}, {"X": None, "Y": 1}],
        ),
        ("MAP('a' := 1, 'b' := B)", "MAP<STRING, BIGINT>", {"a": 1, "b": 2**31}),
        ("MAP(1 := 'x', '2' := 'y')", "MAP<INTEGER, STRING>", {1: "x", 2: "y"}),
    ],
)
def test_constructors_widen_to_one_type(text: str, type_: str, value: Any) -> None:
    result = compiled(text)
    assert str(result.type) == type_
    if value is not None:
        assert result.evaluate(ROW) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I IN (1, 2.0, 3.00, '4.000')", True),  # DECIMAL(13, 3): 4 = 4.000
        ("F IN (D)", True),  # DECIMAL cast to DOUBLE: 11.01 = 11.01
        ("B IN (2147483648)", True),
        ("BO IN ('tr')", True),  # a prefix of "true", as ksqlDB's exact boolean parse takes
        ("AI IN (AB)", True),  # ARRAY<INTEGER> widened to ARRAY<BIGINT>
        ("AB IN (ARRAY[1, 2])", True),
        ("SI IN (STRUCT(F0 := 10))", True),
        ("S IN ('x', 1)", True),
        ("I IN (NULL)", False),
    ],
)
def test_in_lists_compare_in_one_type(text: str, value: bool) -> None:
    assert compiled(text).evaluate(ROW) is value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("BO IN (10)", "operator does not exist: BOOLEAN = INTEGER (10)\nHint: You might need to"),
        ("BO IN (S)", "operator does not exist: BOOLEAN = STRING (S)"),
        ("S IN (F)", "operator does not exist: STRING = DOUBLE (F)"),
        ("I IN ('x')", 'invalid input syntax for type INTEGER: "x".'),
        ("BO IN ('maybe')", 'invalid input syntax for type BOOLEAN: "maybe".'),
        ("AB IN (ARRAY['10', 'not 10'])", 'invalid input syntax for type BIGINT: "not 10".'),
        ("AB IN (I)", "operator does not exist: ARRAY<BIGINT> = INTEGER (I)"),
        ("SI IN (ARRAY[10])", "operator does not exist: STRUCT<`F0` INTEGER> = ARRAY<INTEGER>"),
    ],
)
def test_in_lists_refuse_as_ksqldb_does(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compiled(text)
    assert caught.value.message.startswith("Invalid Predicate: ")
    assert message in caught.value.message


def test_constructors_refuse_what_does_not_parse() -> None:
    with pytest.raises(ExpressionError, match='invalid input syntax for type INTEGER: "nan"'):
        compiled("ARRAY[1, 'nan']")
    with pytest.raises(ExpressionError, match="operator does not exist: INTEGER = BOOLEAN"):
        compiled("MAP('a' := 1, 'b' := BO)")


def test_type_rules() -> None:
    assert can_coerce(INTEGER, BIGINT, False) == BIGINT
    assert can_coerce(BIGINT, INTEGER, False) is None
    assert can_coerce(STRING, INTEGER, False) is None
    assert can_coerce(STRING, INTEGER, True) == INTEGER
    assert can_coerce(DOUBLE, DecimalType(4, 2), True) is None
    assert can_coerce(ArrayType(INTEGER), ArrayType(DOUBLE), False) == ArrayType(DOUBLE)
    assert can_coerce(
        StructType((StructField("A", INTEGER),)), StructType((StructField("B", STRING),)), False
    ) == StructType((StructField("A", INTEGER), StructField("B", STRING)))
    assert decimal_type_of(Decimal("0.8")) == DecimalType(2, 1)
    assert decimal_type_of(Decimal("0.005")) == DecimalType(4, 3)
    assert decimal_type_of(Decimal("12.50")) == DecimalType(4, 2)
    assert [parse_boolean_exact(t) for t in ("T", "ye", "n", "fals", "", "x")] == [
        True,
        True,
        False,
        False,
        None,
        None,
    ]
