"""Scripts: splitting, statement positions and text, DEFINE and ${var}, the cache."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import (
    CreateSource,
    ParseError,
    Select,
    parse,
    parse_cached,
    parse_one,
)

SCRIPT = """-- a leading comment; with a semicolon
CREATE STREAM s (k STRING KEY, v STRING) WITH (kafka_topic='a;b', value_format='JSON');
/* between ; statements */
  SELECT 'x;y', `we;ird` FROM s -- trailing ; comment
  EMIT CHANGES;
;;
INSERT INTO s (k, v) VALUES ('1', 'it''s; fine');
-- only a comment at the end;
"""


def test_split_positions_and_text():
    statements = parse(SCRIPT)
    assert [type(s).__name__ for s in statements] == ["CreateSource", "Select", "InsertValues"]
    create, select, insert = statements
    assert (create.line, create.column, create.offset) == (2, 1, SCRIPT.index("CREATE"))
    assert create.text.startswith("CREATE STREAM") and create.text.endswith("'JSON');")
    assert create.properties["KAFKA_TOPIC"] == "a;b"
    assert (select.line, select.column) == (4, 3)
    assert select.text == "SELECT 'x;y', `we;ird` FROM s -- trailing ; comment\n  EMIT CHANGES;"
    assert select.query.emit == "CHANGES"
    assert (insert.line, insert.column) == (7, 1)
    assert insert.values[1].this == "it's; fine"
    for statement in statements:
        assert SCRIPT[statement.offset :].startswith(statement.text)


def test_empty_and_comment_only_scripts():
    assert parse("") == []
    assert parse("  ;; -- nothing\n /* at all */ ") == []


def test_last_statement_without_semicolon():
    (s,) = parse("SHOW STREAMS;\n\n", {}) + parse("SHOW TABLES  \n")[1:]
    assert s.text == "SHOW STREAMS;"
    assert parse("SHOW TABLES  \n")[0].text == "SHOW TABLES"


def test_define_and_substitute():
    statements = parse(
        "DEFINE topic = 'orders';\n"
        "DEFINE Fmt = 'JSON';\n"
        "CREATE STREAM ${topic}_s (id INT KEY) WITH (kafka_topic='${topic}', format='${FMT}');\n"
        "-- ${not_defined} in a comment is left alone\n"
        "UNDEFINE topic;\n"
    )
    create = statements[2]
    assert isinstance(create, CreateSource)
    assert create.name == "ORDERS_S" and create.properties["kafka_topic"] == "orders"
    assert create.properties["FORMAT"] == "JSON"
    # the text is what was parsed: the command log keeps it, and it is never substituted again
    assert create.text.startswith("CREATE STREAM orders_s ") and "${" not in create.text
    assert (create.line, create.column) == (3, 1)  # positions stay those of the source


def test_substitution_can_be_turned_off():
    text = "SELECT * FROM t WHERE name = '${x}';"
    statement = parse_one(text, substitution=False)
    assert statement.text == text


def test_variables_argument_and_undefine():
    s = parse_one("SELECT * FROM ${src}", {"src": "pageviews"})
    assert isinstance(s, Select) and s.query.source.name == "PAGEVIEWS"
    with pytest.raises(ParseError) as info:
        parse("DEFINE x = 'a';\nUNDEFINE x;\nSELECT * FROM ${x};")
    assert (info.value.line, info.value.column) == (3, 15)
    assert "variable 'x' is not defined" in info.value.message


def test_error_after_substitution_points_at_original_text():
    script = "DEFINE t = 'a b c';\nSELECT x FROM ${t} WHERE a;"
    with pytest.raises(ParseError) as info:
        parse(script)
    # the stray token lies inside the substituted value: the error points at "${t}"
    assert (info.value.line, info.value.column) == (2, 15)
    with pytest.raises(ParseError) as info:
        parse("DEFINE t = 'abc';\nSELECT x FROM ${t} WHERE;")
    assert (info.value.line, info.value.column) == (2, 25)  # just after WHERE, original offsets
    assert info.value.statement_text == "SELECT x FROM ${t} WHERE;"


def test_parse_one_needs_exactly_one():
    with pytest.raises(ParseError, match="expected a statement, found end of input"):
        parse_one("-- nothing")
    with pytest.raises(ParseError) as info:
        parse_one("SHOW STREAMS; SHOW TABLES;")
    assert (info.value.line, info.value.column) == (1, 15)
    assert "expected one statement, found a second one" in info.value.message


def test_cache_returns_the_same_immutable_statement():
    text = "SELECT * FROM users WHERE id = 'cache-test';"
    first = parse_cached(text)
    assert parse_cached(text) is first
    assert parse_cached.cache_info().hits >= 1
    assert first == parse_one(text)
    with pytest.raises(AttributeError):
        first.text = "x"  # type: ignore[misc]
    assert parse_cached.cache_info().maxsize == 4096
