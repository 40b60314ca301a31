"""ParseError: positions on multi-line input, messages that say what was expected."""

from __future__ import annotations

import pickle

import pytest

from headwater.sqlparse_ext import ParseError, parse


def test_multiline_position_and_statement_text():
    script = "SHOW STREAMS;\n\nCREATE STREAM s (\n  a INT,\n  b STRNG<\n) WITH (x=1);"
    with pytest.raises(ParseError) as info:
        parse(script)
    error = info.value
    assert (error.line, error.column) == (5, 10)
    assert error.message == "line 5:10: expected ',' or ')' after a column, found '<'"
    assert error.statement_text == "CREATE STREAM s (\n  a INT,\n  b STRNG<\n) WITH (x=1);"
    assert error.error_code == 40001 and str(error) == error.message


@pytest.mark.parametrize(
    ("script", "line", "column", "fragment"),
    [
        ("SELECT 'abc FROM s", 1, 8, "expected the closing ' of this string literal"),
        ("SELECT `abc FROM s", 1, 8, "closing ` of this quoted identifier"),
        ("SHOW TABLES;\n/* open", 2, 1, "expected the closing */ of this comment"),
        ("SELECT a FROM s WHERE (a = 1", 1, 29, "expected ')', found end of statement"),
        ("SELECT a FROM s\nWHERE a = = 1", 2, 11, "found '='"),
        ("CREATE STREAM s (a INT) WITH kafka_topic='x'", 1, 30, "expected '(' after WITH"),
        ("SELECT * FROM s;;\n\n  DROP STREAM", 3, 14, "expected a stream or table name"),
    ],
)
def test_error_messages(v, script, line, column, fragment):
    v.validate_error(script, line, column, fragment)


def test_deep_nesting_is_a_parse_error():
    with pytest.raises(ParseError) as info:
        parse("SELECT " + "(" * 5000 + "1" + ")" * 5000 + " FROM s")
    assert info.value.line == 1


def test_error_pickles():
    error = ParseError("line 1:1: expected x, found 'y'", 1, 1, "y")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.line, copy.column, copy.statement_text) == (error.message, 1, 1, "y")
