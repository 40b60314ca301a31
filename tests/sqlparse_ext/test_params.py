"""Client-side qmark binding (headwater.sqlparse_ext.params): literals, the lexical scanner, and
hostile input that must never escape its literal."""

from __future__ import annotations

import datetime
import decimal
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.sqlparse_ext.params import (
    MAX_DEPTH,
    ParameterError,
    bind,
    leading_keyword,
    literal,
    placeholders,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "NULL"),
        (True, "TRUE"),
        (False, "FALSE"),
        (0, "0"),
        (42, "42"),
        (-7, "(-7)"),
        (10**30, "1" + "0" * 30),
        (1.5, "1.5"),
        (-0.25, "(-0.25)"),
        (1e20, "1e+20"),
        (decimal.Decimal("12.30"), "12.30"),
        (decimal.Decimal("1E+3"), "1000"),
        (decimal.Decimal("-0.5"), "(-0.5)"),
        ("abc", "'abc'"),
        ("", "''"),
        ("it's", "'it''s'"),
        ("''", "''''''"),
        (datetime.date(2024, 5, 1), "'2024-05-01'"),
        (datetime.time(12, 30, 1), "'12:30:01'"),
        (datetime.datetime(2024, 5, 1, 12, 30), "'2024-05-01T12:30:00'"),
        (
            datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC),
            "'2024-05-01T00:00:00+00:00'",
        ),
        (b"hi", "TO_BYTES('aGk=', 'base64')"),
        (bytearray(b"\x00"), "TO_BYTES('AA==', 'base64')"),
        ([1, "a", None], "ARRAY[1, 'a', NULL]"),
        ((), "ARRAY[]"),
        ({"k": 1, "o'": [True]}, "MAP('k' := 1, 'o''' := ARRAY[TRUE])"),
        (OrderedDict([("a", {"b": 2})]), "MAP('a' := MAP('b' := 2))"),
    ],
)
def test_literal(value: object, expected: str) -> None:
    assert literal(value) == expected


def test_int_subclass_renders_as_number_not_repr() -> None:
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    assert literal(Level.HIGH) == "3"


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        decimal.Decimal("NaN"),
        decimal.Decimal("Infinity"),
        decimal.Decimal("-Infinity"),
        object(),
        {1, 2},
        complex(1, 2),
        [float("nan")],
        {"k": float("inf")},
    ],
    ids=repr,
)
def test_values_without_a_safe_literal_are_refused(value: object) -> None:
    with pytest.raises(ParameterError):
        literal(value)


def test_parameter_error_is_a_value_error() -> None:
    assert issubclass(ParameterError, ValueError)


def test_cyclic_and_too_deep_values_are_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ParameterError, match="deeper"):
        literal(cycle)
    nested: Any = 1
    for _ in range(MAX_DEPTH + 2):
        nested = [nested]
    with pytest.raises(ParameterError):
        literal(nested)


def test_bind_replaces_placeholders_in_order() -> None:
    sql = "SELECT * FROM t WHERE a = ? AND b = ? AND c IN (?, ?);"
    assert bind(sql, ["x", 2, None, True]) == (
        "SELECT * FROM t WHERE a = 'x' AND b = 2 AND c IN (NULL, TRUE);"
    )


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT '?' FROM t WHERE a = ?", "SELECT '?' FROM t WHERE a = 1"),
        ("SELECT 'it''s ?' , ? FROM t", "SELECT 'it''s ?' , 1 FROM t"),
        ("SELECT `col?` FROM t WHERE x = ?", "SELECT `col?` FROM t WHERE x = 1"),
        ("SELECT `a``?` FROM t WHERE x = ?", "SELECT `a``?` FROM t WHERE x = 1"),
        ('SELECT "a?""?" FROM t WHERE x = ?', 'SELECT "a?""?" FROM t WHERE x = 1'),
        ("SELECT ? -- is it ?\nFROM t", "SELECT 1 -- is it ?\nFROM t"),
        ("SELECT /* ? */ ? FROM t", "SELECT /* ? */ 1 FROM t"),
        ("SELECT /* multi\n line ? */ ?", "SELECT /* multi\n line ? */ 1"),
        ("SELECT ?-- trailing comment ?", "SELECT 1-- trailing comment ?"),
        ("SELECT a?b", "SELECT a1b"),
    ],
)
def test_question_marks_inside_literals_identifiers_and_comments_are_not_placeholders(
    sql: str, expected: str
) -> None:
    assert bind(sql, [1]) == expected


def test_unterminated_literal_or_comment_hides_the_rest() -> None:
    assert placeholders("SELECT ?, 'open ? ") == [7]
    assert placeholders("SELECT ? /* open ? ") == [7]
    assert placeholders("SELECT ? `open ?") == [7]


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT ?", []),
        ("SELECT ?", [1, 2]),
        ("SELECT 1", [1]),
        ("SELECT '?'", [1]),
        ("SELECT ? -- ?", [1, 2]),
    ],
)
def test_wrong_parameter_counts_are_refused(sql: str, params: list[object]) -> None:
    with pytest.raises(ParameterError, match="placeholder"):
        bind(sql, params)


@pytest.mark.parametrize("params", ["ab", b"ab", {"a": 1}, 5, {1}])
def test_parameters_must_be_a_list_or_tuple(params: Any) -> None:
    with pytest.raises(ParameterError, match="sequence"):
        bind("SELECT ?, ?", params)


def test_empty_parameters_bind_a_statement_without_placeholders() -> None:
    assert bind("SELECT 1;", ()) == "SELECT 1;"


@pytest.mark.parametrize(
    "hostile",
    [
        "' OR '1'='1",
        "'; DROP STREAM orders; --",
        "x' -- ",
        "/* ' */",
        "\\'; DROP TABLE t; --",
        "`; DROP STREAM s; --",
        '"; DROP STREAM s; --',
        "?",
        "'?'",
        "\n'\n",
    ],
)
def test_hostile_strings_stay_one_literal(hostile: str) -> None:
    bound = bind("SELECT * FROM t WHERE a = ? AND b = ?;", [hostile, 7])
    # The scanner sees exactly the statement's own code outside the single literal.
    literal_text = literal(hostile)
    assert bound == f"SELECT * FROM t WHERE a = {literal_text} AND b = 7;"
    assert placeholders(bound.replace(literal_text, "'x'")) == []
    code = "".join(bound[i] for i in _code_indexes(bound))
    assert code == "SELECT * FROM t WHERE a =  AND b = 7;"


def test_negative_number_after_minus_cannot_open_a_comment() -> None:
    bound = bind("SELECT 10 -? AS x, 'keep' FROM t;", [-1])
    assert bound == "SELECT 10 -(-1) AS x, 'keep' FROM t;"
    assert "--" not in bound


def _code_indexes(sql: str) -> list[int]:
    """Indexes of characters outside literals, identifiers and comments (the module's scanner)."""
    from headwater.sqlparse_ext.params import _code_positions

    return list(_code_positions(sql))


@settings(max_examples=300, derandomize=True)
@given(st.text())
def test_any_string_binds_to_a_literal_that_reads_back(value: str) -> None:
    bound = bind("SELECT ? FROM t WHERE x = ?;", [value, 1])
    assert placeholders(bound) == []
    code = "".join(bound[i] for i in _code_indexes(bound))
    assert code == "SELECT  FROM t WHERE x = 1;"
    start = len("SELECT ")
    end = bound.index(" FROM t WHERE x = 1;")
    assert bound[start:end][1:-1].replace("''", "'") == value


@settings(max_examples=200, derandomize=True)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_any_supported_value_leaves_no_stray_code(value: object) -> None:
    bound = bind("SELECT ?;", [value])
    assert placeholders(bound) == []
    assert bound.endswith(";")
    assert "--" not in "".join(bound[i] for i in _code_indexes(bound))


@pytest.mark.parametrize(
    ("sql", "keyword"),
    [
        ("SELECT 1", "SELECT"),
        ("  select * from t;", "SELECT"),
        ("-- note\n/* block */ Select 1", "SELECT"),
        ("/* SELECT */ SHOW STREAMS;", "SHOW"),
        ("-- SELECT\nCREATE STREAM s AS SELECT 1;", "CREATE"),
        ("INSERT INTO s SELECT * FROM t;", "INSERT"),
        ("", ""),
        ("   -- only a comment", ""),
        ("(SELECT 1)", ""),
        ("SELECT_X", "SELECT_X"),
    ],
)
def test_leading_keyword(sql: str, keyword: str) -> None:
    assert leading_keyword(sql) == keyword
