"""suggest.py as table cases: the text before the cursor -> what fits there."""

from __future__ import annotations

import pytest

from headwater.shell.suggest import Kind, Suggestion, suggest

K = Kind


@pytest.mark.parametrize(
    ("before", "after", "word", "kinds"),
    [
        ("", "", "", [K.KEYWORD]),
        ("SEL", "", "SEL", [K.KEYWORD]),
        ("SHOW STREAMS; ", "", "", [K.KEYWORD]),
        ("SELECT * FROM ", "", "", [K.SOURCE]),
        ("select * from ord", "", "ord", [K.SOURCE]),
        ("SELECT * FROM a JOIN ", "", "", [K.SOURCE]),
        ("INSERT INTO ", "", "", [K.STREAM]),
        ("DESCRIBE ", "", "", [K.SOURCE, K.KEYWORD]),
        ("DESCRIBE orders ", "", "", [K.KEYWORD]),
        ("DROP ", "", "", [K.KEYWORD]),
        ("DROP STREAM ", "", "", [K.STREAM, K.KEYWORD]),
        ("DROP TABLE IF EXISTS ", "", "", [K.TABLE]),
        ("TERMINATE ", "", "", [K.QUERY, K.KEYWORD]),
        ("PRINT ", "", "", [K.TOPIC]),
        ("SET ", "", "", [K.PROPERTY]),
        ("SET 'auto.o", "", "auto.o", [K.PROPERTY]),
        ("UNSET '", "", "", [K.PROPERTY]),
        ("UNDEFINE ", "", "", [K.VARIABLE]),
        ("SELECT * FROM ${ta", "", "ta", [K.VARIABLE]),
        ("SELECT ", " FROM orders;", "", [K.COLUMN, K.FUNCTION, K.KEYWORD]),
        ("SELECT * FROM orders WHERE ", "", "", [K.COLUMN, K.FUNCTION, K.KEYWORD]),
        ("SELECT * FROM orders WHERE id = 'x' AND am", "", "am", [K.COLUMN, K.FUNCTION, K.KEYWORD]),
        ("SELECT * FROM orders WHERE name = 'it''s", "", "s", []),
        ("SHOW ", "", "", [K.KEYWORD]),
        ("LIST ", "", "", [K.KEYWORD]),
        ("CREATE ", "", "", [K.KEYWORD]),
        ("SELECT * FROM t EMIT ", "", "", [K.KEYWORD]),
    ],
)
def test_what_fits(before: str, after: str, word: str, kinds: list[Kind]) -> None:
    found = suggest(before, after)
    assert found.word == word
    assert [s.kind for s in found.items] == kinds


def test_columns_come_from_the_statements_sources_even_after_the_cursor() -> None:
    found = suggest("SELECT ", " FROM orders o JOIN customers c ON o.cid = c.id;")
    assert found.items[0] == Suggestion(K.COLUMN, sources=("ORDERS", "CUSTOMERS"))


def test_alias_dot_offers_that_sources_columns() -> None:
    found = suggest("SELECT o.", " FROM orders o")
    assert (found.word, found.items) == ("", (Suggestion(K.COLUMN, sources=("ORDERS",)),))


def test_only_the_current_statement_counts() -> None:
    found = suggest("SELECT * FROM a; SHOW ", "")
    assert found.items[0].words[:2] == ("STREAMS", "TABLES")


def test_statement_starts_first_on_an_empty_statement() -> None:
    assert suggest("").items[0].words[0] == "SELECT"


def test_quoted_property_is_marked_quoted() -> None:
    assert suggest("SET 'ksql.").quoted
    assert not suggest("SET ").quoted
