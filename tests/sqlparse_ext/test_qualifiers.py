"""Qualifiers that name no source of the statement are refused while building it (ksqlDB's
AstBuilder), before anything is resolved: so that refusal comes first."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import ParseError, parse_one


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x.a, s.b FROM s AS x",  # a source by its name or its alias
        "SELECT l.*, r.v FROM l JOIN r ON l.k = r.k",
        "INSERT INTO o SELECT s.a FROM s",
        "SELECT a->b FROM s",  # a struct field, not a qualifier
    ],
)
def test_qualifiers_naming_a_relation_pass(sql: str) -> None:
    parse_one(sql)


@pytest.mark.parametrize(
    ("sql", "name", "column"),
    [
        ("SELECT unknown.* FROM s", "UNKNOWN", 8),
        ("SELECT a FROM l JOIN r ON l.k = nope.k", "NOPE", 33),
        ("INSERT INTO o SELECT o.a FROM s", "O", 22),  # the target is not read
        ("INSERT INTO t (a) VALUES (foo.bar)", "FOO", 27),
        ("SELECT `x`.a FROM s x", "x", 8),  # quoted: case kept
    ],
)
def test_a_qualifier_naming_no_relation_is_refused_first(sql: str, name: str, column: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse_one(sql)
    assert caught.value.message.startswith(
        f"Failed to prepare statement: '{name}' is not a valid stream/table name or alias. "
        f"(line 1:{column})"
    )
    assert (caught.value.line, caught.value.column) == (1, column)
