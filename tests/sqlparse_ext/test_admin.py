"""SHOW/LIST, DESCRIBE, EXPLAIN, PRINT, TERMINATE/PAUSE/RESUME, SET/UNSET, DEFINE/UNDEFINE,
RUN SCRIPT and ASSERT."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import (
    AssertSchema,
    AssertTopic,
    CreateAsSelect,
    DefineVariable,
    Describe,
    Duration,
    Explain,
    PauseQuery,
    Print,
    ResumeQuery,
    RunScript,
    SetProperty,
    Show,
    Terminate,
    UndefineVariable,
    UnsetProperty,
)


@pytest.mark.parametrize(
    ("sql", "what", "extended"),
    [
        ("SHOW STREAMS", "STREAMS", False),
        ("LIST TABLES EXTENDED", "TABLES", True),
        ("SHOW QUERIES EXTENDED", "QUERIES", True),
        ("list topics", "TOPICS", False),
        ("SHOW ALL TOPICS EXTENDED", "ALL TOPICS", True),
        ("SHOW PROPERTIES", "PROPERTIES", False),
        ("SHOW FUNCTIONS", "FUNCTIONS", False),
        ("SHOW TYPES", "TYPES", False),
        ("SHOW VARIABLES", "VARIABLES", False),
        ("SHOW SINK CONNECTORS", "SINK CONNECTORS", False),
        ("SHOW CONNECTOR PLUGINS", "CONNECTOR PLUGINS", False),
    ],
)
def test_show(v, sql, what, extended):
    s = v.validate_identity(sql)
    assert isinstance(s, Show) and (s.what, s.extended) == (what, extended)


@pytest.mark.parametrize(
    ("sql", "what", "name", "extended"),
    [
        ("DESCRIBE pageviews", "SOURCE", "PAGEVIEWS", False),
        ("DESCRIBE `PageViews` EXTENDED", "SOURCE", "PageViews", True),
        ("DESCRIBE STREAMS EXTENDED", "STREAMS", None, True),
        ("DESCRIBE TABLES", "TABLES", None, False),
        ("DESCRIBE FUNCTION array_max", "FUNCTION", "ARRAY_MAX", False),
        ("DESCRIBE CONNECTOR c", "CONNECTOR", "C", False),
    ],
)
def test_describe(v, sql, what, name, extended):
    s = v.validate_identity(sql)
    assert isinstance(s, Describe) and (s.what, s.name, s.extended) == (what, name, extended)


def test_explain(v):
    s = v.validate_identity("EXPLAIN csas_output_0")
    assert isinstance(s, Explain) and (s.query_id, s.statement) == ("CSAS_OUTPUT_0", None)
    s = v.validate_identity("EXPLAIN CREATE STREAM o AS SELECT * FROM i")
    assert s.query_id is None and isinstance(s.statement, CreateAsSelect)
    assert v.validate_identity("EXPLAIN SELECT * FROM t").statement.query.source.name == "T"


def test_print(v):
    s = v.validate_identity("PRINT 'my-topic' FROM BEGINNING INTERVAL 2 LIMIT 10")
    assert isinstance(s, Print)
    assert (s.topic, s.from_beginning, s.interval, s.limit) == ("my-topic", True, 2, 10)
    assert v.validate_identity("PRINT topic1").topic == "topic1"


@pytest.mark.parametrize(
    ("sql", "cls", "query_id"),
    [
        ("TERMINATE csas_1", Terminate, "CSAS_1"),
        ("TERMINATE ALL", Terminate, None),
        ("PAUSE `q1`", PauseQuery, "q1"),
        ("RESUME ALL", ResumeQuery, None),
    ],
)
def test_query_control(v, sql, cls, query_id):
    s = v.validate_identity(sql)
    assert type(s) is cls and s.query_id == query_id


def test_properties_and_variables(v):
    s = v.validate_identity("SET 'auto.offset.reset' = 'earliest'")
    assert isinstance(s, SetProperty) and (s.name, s.value) == ("auto.offset.reset", "earliest")
    u = v.validate_identity("UNSET 'auto.offset.reset'")
    assert isinstance(u, UnsetProperty) and u.name == "auto.offset.reset"
    d = v.validate_identity("DEFINE topic = 'orders'")
    assert isinstance(d, DefineVariable) and (d.name, d.value) == ("topic", "orders")
    assert isinstance(v.validate_identity("UNDEFINE topic"), UndefineVariable)
    r = v.validate_identity("RUN SCRIPT '/tmp/x.sql'")
    assert isinstance(r, RunScript) and r.path == "/tmp/x.sql"


def test_asserts(v):
    t = v.validate_identity(
        "ASSERT NOT EXISTS TOPIC 'orders' WITH (partitions=3) TIMEOUT 5 SECONDS"
    )
    assert isinstance(t, AssertTopic)
    assert (t.topic, t.exists, t.properties["PARTITIONS"], t.timeout) == (
        "orders",
        False,
        3,
        Duration(5, "SECONDS"),
    )
    s = v.validate_identity("ASSERT SCHEMA SUBJECT 'orders-value' ID 4")
    assert isinstance(s, AssertSchema) and (s.subject, s.schema_id, s.exists) == (
        "orders-value",
        4,
        True,
    )


@pytest.mark.parametrize(
    ("sql", "line", "column", "fragment"),
    [
        ("SHOW STREAM", 1, 6, "expected STREAMS, TABLES, QUERIES, TOPICS"),
        ("SHOW ALL TABLES", 1, 10, "expected TOPICS after ALL"),
        ("SHOW PROPERTIES EXTENDED", 1, 17, "expected end of statement, found 'EXTENDED'"),
        ("DESCRIBE", 1, 9, "expected a stream or table name"),
        ("PRINT t FROM start", 1, 14, "expected BEGINNING after FROM"),
        ("TERMINATE", 1, 10, "expected a query id or ALL"),
        ("SET auto.offset.reset = 'earliest'", 1, 5, "expected a quoted property name after SET"),
        ("DEFINE x = 1", 1, 12, "expected a quoted variable value"),
        ("RUN 'x'", 1, 5, "expected SCRIPT after RUN"),
        ("ASSERT VALUES foo (id INT) VALUES (123)", 1, 8, "expected TOPIC or SCHEMA after ASSERT"),
        ("ASSERT SCHEMA TIMEOUT 1 SECOND", 1, 15, "expected SUBJECT or ID"),
        ("HELLO world", 1, 1, "Unknown statement 'HELLO'\nDid you mean 'SELECT'?"),
        ("`SELECT` 1", 1, 1, "Unknown statement '`SELECT`'"),
    ],
)
def test_admin_errors(v, sql, line, column, fragment):
    v.validate_error(sql, line, column, fragment)
