"""Expressions: lambdas, struct dereference, constructors, CASE, CAST, predicates, literals."""

from __future__ import annotations

import pytest
from sqlglot import exp

from headwater.sqlparse_ext import expressions as hx


def _item(v, expression: str, expected: str | None = None) -> exp.Expr:
    """Round-trip ``SELECT <expression> FROM s`` and return the select item."""
    wanted = f"SELECT {expected} FROM s" if expected is not None else None
    return v.validate_identity(f"SELECT {expression} FROM s", wanted).query.select[0]


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("TRANSFORM(a, x => x + 1)", exp.Anonymous),
        ("REDUCE(m, 0, (s, k, v) => s + v)", exp.Anonymous),
        ("a->b", hx.StructDeref),
        ("a->b->c", hx.StructDeref),
        ("a[1]", exp.Bracket),
        ("a[-1]", exp.Bracket),
        ("ARRAY[1, 2, 3]", hx.ArrayConstructor),
        ("MAP('a' := 1, 'b' := 2)", hx.MapConstructor),
        ("STRUCT(a := 1, `B` := 'x')", hx.StructConstructor),
        ("CASE WHEN a > 1 THEN 'x' WHEN a < 0 THEN 'y' ELSE 'z' END", exp.Case),
        ("CASE a WHEN 1 THEN 'one' END", exp.Case),
        ("CAST(a AS DECIMAL(4, 2))", exp.Cast),
        ("CAST(a AS MAP<STRING, ARRAY<INTEGER>>)", exp.Cast),
        ("a IN (1, 2, 3)", exp.In),
        ("a NOT IN ('x')", exp.Not),
        ("a BETWEEN 1 AND 5", exp.Between),
        ("a NOT BETWEEN 1 AND 5", exp.Not),
        ("a LIKE 'x%'", exp.Like),
        ("a LIKE 'x!%' ESCAPE '!'", exp.Escape),
        ("a IS NULL", exp.Is),
        ("a IS NOT NULL", exp.Not),
        ("a IS DISTINCT FROM b", exp.NullSafeNEQ),
        ("a IS NOT DISTINCT FROM b", exp.NullSafeEQ),
        ("'a' || b", exp.DPipe),
        ("-a % 3 / 2 * 1.5", exp.Mul),
        ("NOT (a OR b) AND TRUE", exp.And),
        ("COUNT(*)", exp.Anonymous),
        ("NULL", exp.Null),
        ("1.5E3", exp.Literal),
    ],
)
def test_expression_round_trip(v, text, node):
    assert isinstance(_item(v, text), node)


def test_function_names_stay_as_written(v):
    item = _item(v, "array_max(x)")
    assert isinstance(item, exp.Anonymous) and item.name == "array_max"


def test_struct_deref_chain_and_lambda_shape(v):
    deref = _item(v, "a->b->c")
    assert deref.expression.name == "c" and deref.this.expression.name == "b"
    call = _item(v, "FILTER(m, (k, val) => LEN(k) > 2)")
    lam = call.expressions[1]
    assert isinstance(lam, exp.Lambda)
    assert [p.name for p in lam.expressions] == ["k", "val"]
    assert _item(v, "TRANSFORM(a, (x) => x)", "TRANSFORM(a, x => x)") is not None


def test_constructors_entries(v):
    struct = _item(v, "STRUCT(a := 1, b := 'x')")
    assert [e.this.name for e in struct.expressions] == ["a", "b"]
    mapping = _item(v, "MAP(1 + 1 := ARRAY[1])")
    assert mapping.expressions[0].this.sql() == "1 + 1"


def test_string_escapes(v):
    assert _item(v, "'it''s'").this == "it's"
    assert _item(v, "'back\\slash'").this == "back\\slash"


@pytest.mark.parametrize(
    ("sql", "line", "column", "fragment"),
    [
        ("SELECT a-> FROM s", 1, 12, "expected a field name or '*' after '->'"),
        ("SELECT MAP('a' 1) FROM s", 1, 16, "expected ':='"),
        ("SELECT STRUCT(1 := 2) FROM s", 1, 15, "expected a field name"),
        ("SELECT CAST(a AS NULL) FROM s", 1, 18, "expected a type, found 'NULL'"),
        ("SELECT CAST(a INT) FROM s", 1, 15, "expected AS in CAST"),
        ("SELECT 9223372036854775808 FROM s", 1, 8, "Invalid numeric literal: 9223372036854775808"),
        (
            "SELECT -9223372036854775809 FROM s",
            1,
            8,
            "Invalid numeric literal: -9223372036854775809",
        ),
        ("SELECT 1.7976931348623159E308 FROM s", 1, 8, "Number overflows DOUBLE"),
        ("SELECT (SELECT 1 FROM t) FROM s", 1, 9, "found 'SELECT'"),
        ("SELECT f(a b) FROM s", 1, 12, "expected ')', found 'b'"),
        ("SELECT CASE WHEN a THEN 1 FROM s", 1, 27, "expected END after CASE"),
    ],
)
def test_expression_errors(v, sql, line, column, fragment):
    v.validate_error(sql, line, column, fragment)


def test_bigint_limits_accepted(v):
    _item(v, "9223372036854775807")
    _item(v, "-9223372036854775808")
    _item(v, "x - 9223372036854775807")


def test_subscripts_are_kept_as_written(v):
    """ksqlDB's subscripts are 1-based (negative from the end): no offset shifting."""
    assert _item(v, "a[1]").expressions[0].name == "1"
    assert _item(v, "a[-1]").expressions[0].sql() == "-1"
