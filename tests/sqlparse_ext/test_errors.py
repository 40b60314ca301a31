"""ParseError: positions on multi-line input, messages that say what was expected."""

from __future__ import annotations

import pickle

import pytest

from headwater.sqlparse_ext import ParseError, parse
from headwater.sqlparse_ext.parser import edit_distance, nearest_command


def test_multiline_position_and_statement_text():
    script = "SHOW STREAMS;\n\nCREATE STREAM s (\n  a INT,\n  b STRNG<\n) WITH (x=1);"
    with pytest.raises(ParseError) as info:
        parse(script)
    error = info.value
    assert (error.line, error.column) == (5, 10)
    assert error.message == (
        "line 5:10: Syntax Error\n"
        "Expecting {',', ')'}\n"
        "Statement: CREATE STREAM s (\n  a INT,\n  b STRNG<\n) WITH (x=1);"
    )
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


@pytest.mark.parametrize(
    ("script", "message"),
    [
        # the grammar's accepted tokens, when known and at most three, in ksqlDB's names
        (
            "CREATE STREAM s (k STRING (KEY)) WITH (kafka_topic='t')",
            (
                "line 1:28: Syntax Error\nExpecting {'STRING', INTEGER_VALUE}\n"
                "Statement: CREATE STREAM s (k STRING (KEY)) WITH (kafka_topic='t')"
            ),
        ),
        # at the end of the statement, the offending token is ANTLR's <EOF>
        (
            "SELECT a FROM",
            "line 1:14: Syntax Error\nSyntax error at or near '<EOF>' at line 1:14\n",
        ),
        # a string literal is shown as written, quotes included
        (
            "SELECT a FROM s LIMIT 'x'",
            "Syntax error at or near ''x'' at line 1:23",
        ),
        # what building the statement refuses: ksqlDB's AstBuilder prefix
        (
            "SELECT 9223372036854775808 FROM s",
            "Failed to prepare statement: line 1:8: Invalid numeric literal: 9223372036854775808",
        ),
        # a refusal of a node: ksqlDB's NodeLocation prefix, and its explanation
        (
            "CREATE STREAM s (id INT PRIMARY KEY) WITH (kafka_topic='t')",
            (
                "Line: 1, Col: 18: Column `ID` is a 'PRIMARY KEY' column: please use 'KEY' for "
                "streams.\nTables have PRIMARY KEYs"
            ),
        ),
    ],
)
def test_messages_take_the_form_ksqldb_gives_their_kind(script, message):
    with pytest.raises(ParseError) as info:
        parse(script)
    assert message in info.value.message


def test_deep_nesting_is_a_parse_error():
    with pytest.raises(ParseError) as info:
        parse("SELECT " + "(" * 5000 + "1" + ")" * 5000 + " FROM s")
    assert info.value.line == 1


def test_error_pickles():
    error = ParseError("line 1:1: expected x, found 'y'", 1, 1, "y")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.line, copy.column, copy.statement_text) == (error.message, 1, 1, "y")


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [("", "", 0), ("SELEC", "SELECT", 1), ("KITTEN", "SITTING", 3), ("DROP", "", 4)],
)
def test_edit_distance(a, b, distance):
    assert edit_distance(a, b) == distance == edit_distance(b, a)


def test_an_unknown_statement_is_answered_with_the_nearest_command():
    assert nearest_command("selec") == "SELECT"
    assert nearest_command("DESCRIBEE") == "DESCRIBE"
    assert nearest_command("ST") == "SET"  # the first of the nearest, in ksqlDB's order
