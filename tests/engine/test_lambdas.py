"""TRANSFORM, REDUCE and FILTER with lambdas, through the expression compiler."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import Scope, compile_expression
from headwater.sqlparse_ext import parse_one, parse_type

TYPES = {
    "A": "ARRAY<INTEGER>",
    "AN": "ARRAY<INTEGER>",
    "SA": "ARRAY<STRING>",
    "BIG": "BIGINT",
    "M": "MAP<STRING, INTEGER>",
    "MD": "MAP<STRING, DOUBLE>",
    "MA": "MAP<STRING, ARRAY<INTEGER>>",
    "AM": "ARRAY<MAP<STRING, INTEGER>>",
    "I": "INTEGER",
    "N": "ARRAY<INTEGER>",
    "NB": "BIGINT",
    "DEC": "ARRAY<DECIMAL(4, 2)>",
}
SCOPE = Scope({k: parse_type(v) for k, v in TYPES.items()}, frozenset({"T"}), {})
ROW = {
    "A": [3, 6, 2, 10],
    "AN": [5, None],
    "SA": ["to be or", None],
    "BIG": 7,
    "I": 2,
    "M": {"123": 3, "12": 7, "1234": 2},
    "MD": {"yes, thanks": 3.5, "nope": 7.3, "sure, yeah": 2.1},
    "MA": {"hello": [200, 4, 5], "hey": [14, -3, -15, 3], "wow": [2, 3, 4]},
    "AM": [{"goodmorning": 23, "gn": 12}, {"woooooow": 9}],
    "N": None,
    "NB": None,
    "DEC": [Decimal("9.22"), Decimal("10.63"), None],
}


def compiled(text: str) -> Any:
    return compile_expression(parse_one(f"SELECT {text} FROM T;").query.select[0], SCOPE)


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("TRANSFORM(A, x => x + 5)", "ARRAY<INTEGER>", [8, 11, 7, 15]),
        ("TRANSFORM(A, x => CAST(x AS STRING) + 'a')", "ARRAY<STRING>", ["3a", "6a", "2a", "10a"]),
        ("TRANSFORM(A, x => x * BIG)", "ARRAY<BIGINT>", [21, 42, 14, 70]),
        ("TRANSFORM(SA, x => UCASE(x))", "ARRAY<STRING>", ["TO BE OR", None]),
        ("TRANSFORM(N, x => x)", "ARRAY<INTEGER>", None),
        (
            "TRANSFORM(M, (k, v) => k + '_x', (k, v) => v * 2)",
            "MAP<STRING, INTEGER>",
            {"123_x": 6, "12_x": 14, "1234_x": 4},
        ),
        (
            "TRANSFORM(MA, (k, v) => ARRAY_MAX(v), (k, v) => LEN(k))",
            "MAP<INTEGER, INTEGER>",
            {200: 5, 14: 3, 4: 3},
        ),
        ("FILTER(A, x => x > 5)", "ARRAY<INTEGER>", [6, 10]),
        ("FILTER(DEC, x => ROUND(x) >= 10)", "ARRAY<DECIMAL(4, 2)>", [Decimal("10.63")]),
        ("FILTER(M, (k, v) => LEN(k) > 2)", "MAP<STRING, INTEGER>", {"123": 3, "1234": 2}),
        ("REDUCE(A, 2, (s, x) => s + x)", "INTEGER", 23),
        ("REDUCE(N, 2, (s, x) => s + x)", "INTEGER", 2),
        ("REDUCE(A, NB, (s, x) => s + x)", "BIGINT", None),
        ("REDUCE(SA, '', (s, x) => CONCAT(s, x))", "STRING", "to be or"),
        (
            "REDUCE(M, 0, (s, k, v) => CASE WHEN LEN(k) > 3 THEN s + v ELSE s - v END)",
            "INTEGER",
            -8,
        ),
        # HashMap order of the map (as ksqlDB's deserializer builds it): "yes", "sure", "nope".
        (
            (
                "REDUCE(MD, CAST(3.2 AS DOUBLE), (s, x, y) => CASE WHEN INSTR(x, 'ye') > 0 "
                "THEN CEIL(y * s) ELSE FLOOR(s * y) END)"
            ),
            "DOUBLE",
            189.0,
        ),
        (
            (
                "TRANSFORM(FILTER(MA, (p, q) => LEN(p) > 2 AND REDUCE(q, 0, (c, d) => c + d) < 20), "
                "(X, Y) => LPAD(x, REDUCE(Y, 2, (s, k) => ABS(ABS(k) - s)), 'a'), "
                "(X, Y) => REDUCE(ARRAY_UNION(Y, TRANSFORM(Y, z => z * 3)), 0, (e, f) => e + f))"
            ),
            "MAP<STRING, INTEGER>",
            {"hey": -4, "w": 36},
        ),
        (
            (
                "REDUCE(AM, 5, (s, p) => s + REDUCE(TRANSFORM(FILTER(p, (x, y) => LEN(x) > 5 AND "
                "y % 2 != 0), (e, f) => CONCAT(e, 'leah'), (g, h) => h + LEN(g)), 0, "
                "(s2, r, b) => s2 + 2 * b))"
            ),
            "INTEGER",
            107,
        ),
        ("transform(a, X => x + i)", "ARRAY<INTEGER>", [5, 8, 4, 12]),
    ],
)
def test_lambda_functions(text: str, type_: str, value: Any) -> None:
    result = compiled(text)
    assert (str(result.type), result.evaluate(ROW)) == (type_, value)


def test_java_failures() -> None:
    """What throws in ksqlDB's generated Java (NULL unboxed, Collectors.toMap) makes it NULL."""
    assert compiled("TRANSFORM(AN, x => x + 5)").evaluate(ROW) is None
    assert compiled("TRANSFORM(AN, x => -x)").evaluate(ROW) is None
    assert compiled("TRANSFORM(A, x => x / 0)").evaluate(ROW) is None
    assert compiled("REDUCE(AN, 0, (s, x) => s + x)").evaluate(ROW) is None
    assert compiled("FILTER(AN, x => x IS NULL OR x > 1 AND x < 9)").evaluate(ROW) == [5, None]
    assert compiled("FILTER(AN, x => x > 1 AND CAST(NULL AS BOOLEAN))").evaluate(ROW) is None
    assert compiled("FILTER(AN, x => NOT CAST(NULL AS BOOLEAN))").evaluate(ROW) is None
    assert compiled("TRANSFORM(ARRAY_REMOVE(A, 3), x => 1 / 0)").evaluate({"A": [3]}) == []
    # A comparison with NULL is false; string + NULL is "null" + ... (Java's concatenation).
    assert compiled("FILTER(AN, x => x > 1)").evaluate(ROW) == [5]
    assert compiled("TRANSFORM(AN, x => x < 9)").evaluate(ROW) == [True, False]
    assert compiled("TRANSFORM(SA, x => x + '!')").evaluate(ROW) == ["to be or!", "null!"]
    # Repeated keys and NULL values in a built map.
    assert compiled("TRANSFORM(MA, (k, v) => LEN(k), (k, v) => 1)").evaluate(ROW) is None
    assert (
        compiled("TRANSFORM(M, (k, v) => k, (k, v) => ARRAY_MIN(ARRAY[NB]))").evaluate(ROW) is None
    )
    # Outside lambdas, SQL's NULL semantics stay.
    assert compiled("ARRAY[NB + 1, 1]").evaluate(ROW) == [None, 1]


def test_references_constants_and_text() -> None:
    result = compiled("TRANSFORM(A, x => x + I)")
    assert (result.references, result.constant) == (frozenset({"A", "I"}), False)
    assert compiled("REDUCE(A, 0, (s, x) => s + x)").text == "REDUCE(A, 0, (S, X) => (S + X))"
    folded = compiled("TRANSFORM(ARRAY[1, 2], x => x * 2)")
    assert (folded.constant, folded.evaluate({})) == (True, [2, 4])
    assert compiled("FILTER(ARRAY[1, 2], x => x > 1)").evaluate({}) == [2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "REDUCE(A, 0, (s, x) => s + 1.5)",
            (
                "Found invalid instance of generic schema when mapping LAMBDA (S, T) => S to "
                "LAMBDA (INTEGER, INTEGER) => DECIMAL(12, 1). Cannot map S to both INTEGER and "
                "DECIMAL(12, 1)"
            ),
        ),
        ("REDUCE(A, 0, (s, x) => s + BIG)", "Cannot map S to both INTEGER and BIGINT"),
        (
            "FILTER(A, x => x)",
            (
                "Cannot infer generics for LAMBDA (T) => BOOLEAN from "
                "LAMBDA (INTEGER) => INTEGER because they do not have the same schema structure."
            ),
        ),
        ("TRANSFORM(A, x => NULL)", "Cannot infer generics for LAMBDA (T) => R"),
        (
            "TRANSFORM(A, (x, y) => x)",
            "Function 'TRANSFORM' does not accept parameters (ARRAY<INTEGER>, LAMBDA).",
        ),
        (
            "FILTER(M, x => true)",
            "Function 'FILTER' does not accept parameters (MAP<STRING, INTEGER>, LAMBDA).",
        ),
        (
            "TRANSFORM(M, (k, v) => k)",
            "Function 'TRANSFORM' does not accept parameters (MAP<STRING, INTEGER>, LAMBDA).",
        ),
        (
            "REDUCE(I, 0, (s, x) => s)",
            "Function 'REDUCE' does not accept parameters (INTEGER, INTEGER, LAMBDA).",
        ),
        ("ABS(x => x)", "Function 'ABS' does not accept parameters (LAMBDA)."),
        ("TRANSFORM(A, (x, X) => 1)", "Lambda arguments have duplicates: [X, X]"),
        ("TRANSFORM(A, i => i)", "Lambda function argument can't be a column name: I"),
        (
            "TRANSFORM(A, x => TRANSFORM(A, x => x))",
            "Reusing lambda arguments in nested lambda is not allowed",
        ),
        ("TRANSFORM(A, x => T.x)", "Column 'T.X' cannot be resolved."),
        ("TRANSFORM(A, x => y)", "Column 'Y' cannot be resolved."),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as error:
        compiled(text)
    assert message in str(error.value)


def test_lambda_variables_end_with_their_lambda() -> None:
    """Sibling lambdas may reuse names; a name is not visible after its lambda."""
    assert compiled("TRANSFORM(M, (x, y) => x, (x, y) => y + 1)").evaluate(ROW) == {
        "123": 4,
        "12": 8,
        "1234": 3,
    }
    with pytest.raises(ExpressionError, match="Column 'X' cannot be resolved"):
        compiled("ARRAY_LENGTH(TRANSFORM(A, x => x)) + x")
