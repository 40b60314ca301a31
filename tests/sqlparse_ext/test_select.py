"""SELECT: windows, joins, GROUP BY, PARTITION BY, HAVING, EMIT, LIMIT and clause order."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import Duration, Join, JoinWindow, Select, SourceRef, Window


def test_push_query_fields(v):
    s = v.validate_identity(
        "SELECT id, COUNT(*) AS n FROM pageviews p WINDOW TUMBLING (SIZE 30 SECONDS) "
        "WHERE p.x > 1 GROUP BY id HAVING COUNT(*) > 2 EMIT CHANGES LIMIT 10",
        expected="SELECT id, COUNT(*) AS n FROM pageviews AS p WINDOW TUMBLING (SIZE 30 SECONDS) "
        "WHERE p.x > 1 GROUP BY id HAVING COUNT(*) > 2 EMIT CHANGES LIMIT 10",
    )
    assert isinstance(s, Select)
    q = s.query
    assert q.source == SourceRef("PAGEVIEWS", "P")
    assert q.window == Window("TUMBLING", Duration(30, "SECONDS"))
    assert q.window.size.milliseconds == 30_000
    assert (q.emit, q.limit) == ("CHANGES", 10)
    assert q.where.sql() == "p.x > 1" and q.having is not None
    assert [e.sql() for e in q.select] == ["id", "COUNT(*) AS n"]


@pytest.mark.parametrize(
    ("clause", "window"),
    [
        (
            "TUMBLING (SIZE 1 HOUR, RETENTION 2 DAYS, GRACE PERIOD 10 MINUTES)",
            Window(
                "TUMBLING",
                Duration(1, "HOUR"),
                retention=Duration(2, "DAYS"),
                grace=Duration(10, "MINUTES"),
            ),
        ),
        (
            "HOPPING (SIZE 5 SECOND, ADVANCE BY 1 SECONDS)",
            Window("HOPPING", Duration(5, "SECOND"), advance=Duration(1, "SECONDS")),
        ),
        (
            "SESSION (30 SECONDS, GRACE PERIOD 1 MINUTE)",
            Window("SESSION", Duration(30, "SECONDS"), grace=Duration(1, "MINUTE")),
        ),
        ("nWINDOW SESSION (1 SECONDS)", Window("SESSION", Duration(1, "SECONDS"))),
    ],
)
def test_windows(v, clause, window):
    s = v.validate_identity(f"SELECT k, COUNT(*) FROM s WINDOW {clause} GROUP BY k EMIT FINAL")
    assert s.query.window == window and s.query.emit == "FINAL"


def test_limit_takes_a_signed_integer(v):
    # ksqlDB's grammar reads any number there; the query planner refuses a negative one
    assert v.validate_identity("SELECT * FROM s LIMIT -1").query.limit == -1


def test_joins_with_within_and_grace(v):
    s = v.validate_identity(
        "SELECT * FROM l INNER JOIN r WITHIN 10 SECONDS ON l.a = r.a "
        "LEFT OUTER JOIN t ON l.b = t.b "
        "FULL JOIN u AS x WITHIN (1 SECOND, 2 HOURS) GRACE PERIOD 1 MINUTE ON l.c = x.c "
        "RIGHT JOIN w ON l.d = w.d EMIT CHANGES"
    )
    joins = s.query.joins
    assert [j.kind for j in joins] == ["INNER", "LEFT", "FULL", "RIGHT"]
    assert joins[0].within == JoinWindow(Duration(10, "SECONDS"), Duration(10, "SECONDS"))
    assert joins[1] == Join("LEFT", SourceRef("T"), joins[1].on)
    assert joins[2].source == SourceRef("U", "X")
    assert joins[2].within == JoinWindow(
        Duration(1, "SECOND"), Duration(2, "HOURS"), Duration(1, "MINUTE")
    )
    assert joins[3].on.sql() == "l.d = w.d"


def test_partition_by_and_group_by_lists(v):
    q = v.validate_identity("SELECT * FROM s PARTITION BY a, b + 1").query
    assert [e.sql() for e in q.partition_by] == ["a", "b + 1"]
    q = v.validate_identity("SELECT a, b, COUNT(*) FROM s GROUP BY (a, b)").query
    assert [e.sql() for e in q.group_by] == ["a", "b"]
    q = v.validate_identity("SELECT * FROM s GROUP BY (a AND b)").query
    assert q.group_by[0].sql() == "(a AND b)"


def test_pull_query_and_pseudo_columns(v):
    q = v.validate_identity(
        "SELECT ROWTIME, ROWPARTITION, ROWOFFSET, WINDOWSTART, WINDOWEND, `Key` FROM t "
        "WHERE id = 'a' AND WINDOWSTART >= 1"
    ).query
    assert q.emit is None and q.limit is None and q.window is None
    assert [e.name for e in q.select] == [
        "ROWTIME",
        "ROWPARTITION",
        "ROWOFFSET",
        "WINDOWSTART",
        "WINDOWEND",
        "Key",
    ]


def test_star_forms(v):
    q = v.validate_identity("SELECT *, l.*, s->* FROM l JOIN r ON l.a = r.a").query
    assert [e.sql("headwater") for e in q.select] == ["*", "l.*", "s->*"]


@pytest.mark.parametrize(
    ("sql", "line", "column", "fragment"),
    [
        (
            "SELECT * FROM s ORDER BY a",
            1,
            17,
            (
                "expected JOIN, WINDOW, WHERE, GROUP BY, PARTITION BY, HAVING, EMIT, LIMIT or end of "
                "statement, found 'ORDER BY'"
            ),
        ),
        ("SELECT * FROM s EMIT CHANGES WHERE a = 1", 1, 30, "expected LIMIT or end of statement"),
        ("SELECT * FROM s GROUP BY a AND b", 1, 28, "found 'AND'"),
        ("SELECT * FROM s GROUP BY c, (a, b)", 1, 29, "not a parenthesised list"),
        ("SELECT * FROM s PARTITION BY ()", 1, 30, "PARTITION BY requires at least one expression"),
        ("SELECT * FROM s GROUP BY ()", 1, 26, "GROUP BY requires at least one expression"),
        ("SELECT * FROM s LIMIT heh", 1, 23, "expected an integer after LIMIT"),
        ("SELECT * FROM s LIMIT 2.5", 1, 23, "Value must be integer for command: LIMIT"),
        ("SELECT * FROM s LIMIT 3000000000", 1, 23, "Value must be integer for command: LIMIT"),
        ("SELECT * FROM EXPLODE(a)", 1, 15, "table functions go in the SELECT list"),
        ("SELECT * FROM s WHERE a IN ()", 1, 29, "expected an expression in the IN list"),
        (
            "SELECT a FROM s WINDOW SLIDING (SIZE 1 SECOND)",
            1,
            24,
            "expected TUMBLING, HOPPING or SESSION after WINDOW",
        ),
        (
            "SELECT a FROM s WINDOW TUMBLING (SIZE 1 SEC)",
            1,
            41,
            "expected a time unit (DAYS, HOURS, MINUTES, SECONDS or MILLISECONDS), found 'SEC'",
        ),
        ("SELECT a FROM l JOIN r WITHIN 1 SECOND", 1, 39, "expected ON, found end of statement"),
        ("SELECT a FROM l JOIN r a.b = c", 1, 25, "expected WITHIN or ON, found '.'"),
        ("SELECT a", 1, 9, "expected ',' or FROM, found end of statement"),
        ("SELECT a FROM s EMIT SOON", 1, 22, "expected CHANGES or FINAL after EMIT"),
        ("SELECT * FROM (SELECT * FROM s)", 1, 15, "expected a stream or table name"),
    ],
)
def test_select_errors(v, sql, line, column, fragment):
    v.validate_error(sql, line, column, fragment)
