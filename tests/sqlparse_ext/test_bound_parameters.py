"""Bound parameters are data: `?` is bound after `${...}` substitution, in one scan, so neither a
bound value nor a variable's value is ever read as the other (issue 21, item 0)."""

from __future__ import annotations

import datetime
import decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.sqlparse_ext import ParseError, parse, parse_one
from headwater.sqlparse_ext.params import ParameterError, from_json, to_json
from headwater.sqlparse_ext.statements import InsertValues, Select


def _where_literal(statement: Select) -> str:
    return statement.query.where.expression.this


def test_a_bound_value_is_never_substituted():
    variables = {"who": "bob' OR id <> '"}
    statement = parse_one("SELECT id FROM users WHERE id = ?;", variables, parameters=["${who}"])
    assert isinstance(statement, Select)
    assert statement.text == "SELECT id FROM users WHERE id = '${who}';"
    assert _where_literal(statement) == "${who}"


def test_a_value_needs_no_variable_to_exist():
    statement = parse_one(
        "INSERT INTO t (id, v) VALUES (?, ?);", parameters=["${HOME}", "my ${tag}"]
    )
    assert isinstance(statement, InsertValues)
    assert "'${HOME}'" in statement.text and "'my ${tag}'" in statement.text


def test_variables_in_the_text_are_still_substituted_beside_parameters():
    statement = parse_one(
        "SELECT * FROM ${src} WHERE id = ? AND name = '${name}';",
        {"src": "users", "name": "n?"},
        parameters=["x"],
    )
    # a variable's value is not searched for placeholders either
    assert statement.text == "SELECT * FROM users WHERE id = 'x' AND name = 'n?';"


def test_placeholders_inside_literals_identifiers_and_comments_are_not_bound():
    statement = parse_one(
        "SELECT `a?` FROM t /* ? */ WHERE s = '?' AND id = ? -- ?\n;", parameters=[1]
    )
    assert "id = 1" in statement.text and "s = '?'" in statement.text


def test_parameters_bind_across_the_statements_of_a_script():
    first, second = parse(
        "INSERT INTO t (id) VALUES (?); INSERT INTO t (id) VALUES (?);", parameters=[1, 2]
    )
    assert "VALUES (1)" in first.text and "VALUES (2)" in second.text


def test_a_count_that_does_not_match_is_a_parse_error_at_the_placeholder():
    with pytest.raises(ParseError) as too_few:
        parse("SELECT * FROM t\nWHERE a = ? AND b = ?;", parameters=[1])
    assert (too_few.value.line, too_few.value.column) == (2, 21)
    with pytest.raises(ParseError, match="expected 2 '\\?' placeholder"):
        parse("SELECT * FROM t WHERE a = ?;", parameters=[1, 2])


def test_a_value_without_a_literal_is_a_parse_error():
    with pytest.raises(ParseError, match="bound parameter 1"):
        parse("SELECT * FROM t WHERE a = ?;", parameters=[float("inf")])


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        7,
        -3,
        2.5,
        "x'y",
        decimal.Decimal("12.50"),
        b"\x00\xff",
        [1, [2]],
        {"k": [1, None]},
    ],
)
def test_the_wire_form_round_trips(value):
    assert from_json(to_json(value)) == value


def test_dates_travel_as_their_iso_text():
    assert to_json(datetime.date(2024, 5, 1)) == "2024-05-01"


@pytest.mark.parametrize(
    "raw", [{"x": 1}, {"decimal": "abc"}, {"bytes": "!!"}, {"map": [[1]]}, {"map": [[[1], 2]]}]
)
def test_malformed_wire_values_are_refused(raw):
    with pytest.raises(ParameterError):
        from_json(raw)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_string_binds_to_exactly_itself(value):
    statement = parse_one(
        "SELECT * FROM t WHERE id = ?;", {"x": "1' OR '1' = '1"}, parameters=[value]
    )
    assert isinstance(statement, Select)
    assert _where_literal(statement) == value


def test_a_stored_query_text_is_never_substituted_again():
    # the command log keeps the text as parsed; replaying it must not read a bound '${x}' again
    from headwater.engine.persistent.query_run import parse_persistent

    create = parse_one("CREATE STREAM s2 AS SELECT * FROM s WHERE name = ?;", parameters=["${x}"])
    select, sink = parse_persistent(create.text)
    assert sink == "S2" and select.where.expression.this == "${x}"


def test_the_written_text_is_kept_for_clients_that_send_it_on():
    statement = parse_one("SELECT * FROM ${src};", {"src": "orders"})
    assert statement.written == "SELECT * FROM ${src};"
    assert statement.text == "SELECT * FROM orders;"
