"""format.py: tables, JSON, CSV, the staleness footer, errors with a caret, the pager rule."""

from __future__ import annotations

import datetime
import decimal
import json
from decimal import Decimal

import pytest

from headwater import dbapi
from headwater.dbapi.entities import entity_table
from headwater.shell.executor import Entity, Message, Rows, StatementFailed
from headwater.shell.format import (
    OutputFormat,
    _table,
    cell,
    needs_pager,
    render,
    render_error,
    staleness,
)
from headwater.sqlparse_ext.sqltypes import format_double

STREAMS = {
    "@type": "streams",
    "streams": [
        {
            "name": "ORDERS",
            "topic": "orders",
            "keyFormat": "KAFKA",
            "valueFormat": "JSON",
            "isWindowed": False,
        }
    ],
}
CREATED = {
    "@type": "currentStatus",
    "commandId": "stream/`X`/create",
    "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
}
ROWS = Rows(
    ("ID", "TOTAL"),
    ("STRING", "DECIMAL(4, 2)"),
    (("a", decimal.Decimal("1.50")), ("b", None)),
    "q1",
    (dbapi.ServedBy(0, "h1:8088", 10, 0),),
)


def test_show_streams_table_has_the_cli_headers() -> None:
    text = render(Entity(STREAMS, entity_table(STREAMS)), OutputFormat.TABLE).text
    header = text.splitlines()[1]
    assert [h.strip() for h in header.strip("|").split("|")] == [
        "Stream Name",
        "Kafka Topic",
        "Key Format",
        "Value Format",
        "Windowed",
    ]
    assert "| ORDERS " in text and "false" in text


def test_ddl_prints_its_message() -> None:
    text = render(Entity(CREATED, entity_table(CREATED)), OutputFormat.TABLE).text
    assert "Stream created" in text and "stream/`X`/create" not in text
    csv_text = render(Entity(CREATED, entity_table(CREATED)), OutputFormat.CSV).text
    assert csv_text.splitlines()[0] == "Command ID,Status,Message"


def test_describe_function_prints_as_ksqldbs_cli_does() -> None:
    described = {
        "@type": "describe_function",
        "name": "SHIPPING_COST",
        "description": "Shipping cost of a weight in kg",
        "author": "ops",
        "version": "1.0",
        "path": "/ext/shipping.py",
        "type": "SCALAR",
        "functions": [
            {
                "arguments": [
                    {"name": "kg", "type": "DOUBLE", "isVariadic": False},
                    {"name": "more", "type": "STRING", "isVariadic": True},
                ],
                "returnType": "DECIMAL(10, 2)",
                "description": "the cost",
            }
        ],
    }
    text = render(Entity(described, entity_table(described)), OutputFormat.TABLE).text
    assert "Name        : SHIPPING_COST" in text
    assert "Jar         : /ext/shipping.py" in text
    assert "\tVariation   : SHIPPING_COST(kg DOUBLE, more STRING...)" in text
    assert "\tReturns     : DECIMAL(10, 2)" in text
    assert json.loads(render(Entity(described, None), OutputFormat.JSON).text) == described


def test_entity_json_is_the_raw_entity() -> None:
    assert json.loads(render(Entity(STREAMS, None), OutputFormat.JSON).text) == STREAMS


def test_pull_rows_table_with_staleness_footer() -> None:
    text = render(ROWS, OutputFormat.TABLE).text
    assert "1.50" in text and "null" in text
    assert text.splitlines()[-1] == "(2 rows; served by partition 0: h1:8088 at position 10, lag 0)"


def test_pull_rows_csv_keeps_staleness_on_stderr() -> None:
    rendered = render(ROWS, OutputFormat.CSV)
    assert rendered.text == "ID,TOTAL\na,1.50\nb,null"
    assert rendered.note is not None and "lag 0" in rendered.note


def test_pull_rows_json_has_rows_and_served_by() -> None:
    doc = json.loads(render(ROWS, OutputFormat.JSON).text)
    assert doc["rows"] == [{"ID": "a", "TOTAL": 1.5}, {"ID": "b", "TOTAL": None}]
    assert doc["servedBy"] == [{"partition": 0, "host": "h1:8088", "position": 10, "lag": 0}]


def test_staleness_is_never_hidden() -> None:
    assert "staleness unknown" in staleness((), 1)
    many = staleness((dbapi.ServedBy(1, "b", None, 7), dbapi.ServedBy(0, "a", 5, 0)), 3)
    assert many.splitlines() == [
        "(3 rows; served by:",
        "   partition 0: a at position 5, lag 0",
        "   partition 1: b at position ?, lag 7)",
    ]


def test_the_writing_queries_are_in_the_footer() -> None:
    # a replica with no lag behind a query that has not run yet: the footer says both
    served = (dbapi.ServedBy(0, "a", 0, 0),)
    pending = dbapi.WrittenBy("CTAS_T_1", "PENDING", None)
    assert staleness(served, 0, (pending,)) == (
        "(0 rows; served by partition 0: a at position 0, lag 0; written by CTAS_T_1, PENDING: "
        "its rows may be missing (source lag unknown))"
    )
    running = dbapi.WrittenBy("CTAS_T_1", "RUNNING", 12)
    many = staleness((*served, dbapi.ServedBy(1, "b", 3, 1)), 2, (running,))
    assert many.splitlines()[-1] == "   written by CTAS_T_1, 12 source records behind)"
    assert staleness((), 1, (running,)).endswith(
        "staleness unknown; written by CTAS_T_1, 12 source records behind)"
    )
    rows = Rows(("ID",), ("STRING",), (("a",),), "q", served, None, (running,))
    doc = json.loads(render(rows, OutputFormat.JSON).text)
    assert doc["writtenBy"] == [{"queryId": "CTAS_T_1", "state": "RUNNING", "lag": 12}]


def test_cells() -> None:
    assert [cell(v) for v in (None, True, [1, "a"], {"k": 1}, b"hi")] == [
        "null",
        "true",
        '[1,"a"]',
        '{"k":1}',
        "aGk=",
    ]
    assert cell(datetime.date(2024, 5, 1)) == "2024-05-01"


def test_messages() -> None:
    assert render(Message("done"), OutputFormat.TABLE).text == "done"
    assert render(Message("done"), OutputFormat.CSV).note == "done"


def test_error_with_a_caret_under_the_column() -> None:
    error = StatementFailed(
        "line 2:10: expected FROM",
        source_name="x.sql",
        source_text="SHOW STREAMS;\nSELECT * FORM t;",
        line=2,
        column=10,
        statement_text="SELECT * FORM t;",
        error_code=40001,
        has_position=True,
    )
    assert render_error(error, script=True).splitlines() == [
        "x.sql: the statement at line 2 failed",
        "Error: line 2:10: expected FROM",
        "  SELECT * FORM t;",
        "           ^",
    ]


def test_error_without_position_names_the_statement() -> None:
    error = StatementFailed(
        "Could not find STREAM/TABLE 'NOPE'",
        source_name="<input>",
        source_text="DESCRIBE nope;",
        line=1,
        column=1,
        statement_text="DESCRIBE nope;",
        error_code=40001,
    )
    assert render_error(error).splitlines() == [
        "Error: Could not find STREAM/TABLE 'NOPE' (error 40001)",
        "Statement: DESCRIBE nope;",
    ]


def test_pager_rule() -> None:
    assert not needs_pager("a\nb", 80, 24)
    assert needs_pager("x" * 81, 80, 24)
    assert needs_pager("\n".join("r" for _ in range(30)), 80, 24)


EXPLAINED = {
    "@type": "queryDescription",
    "statementText": "EXPLAIN CSAS_BIG_1;",
    "queryDescription": {
        "id": "CSAS_BIG_1",
        "queryType": "PERSISTENT",
        "statementText": "CREATE STREAM big AS ...",
        "fields": [
            {"name": "ID", "schema": {"type": "STRING"}, "type": "KEY"},
            {"name": "Q", "schema": {"type": "INTEGER"}},
        ],
        "sources": ["ORDERS"],
        "sinks": ["BIG"],
        "ksqlHostQueryStatus": {"h:1": "RUNNING"},
        "executionPlan": "> [ SINK ] | Schema: ...",
        "statistics": "messages-written: 3",
        "queryErrors": [{"type": "USER", "errorMessage": "bad JSON"}],
    },
}


def test_explain_prints_sources_sinks_plan_and_errors() -> None:
    text = render(Entity(EXPLAINED, entity_table(EXPLAINED)), OutputFormat.TABLE).text
    assert "CSAS_BIG_1" in text and "h:1: RUNNING" in text
    assert "Sources that this query reads from:" in text and "ORDERS" in text
    assert "Execution plan" in text and "> [ SINK ]" in text
    assert "messages-written: 3" in text and "USER: bad JSON" in text
    assert "| ID    | VARCHAR(STRING)  (key) |" in text.split("Sources")[0]


def test_describe_extended_prints_queries_and_runtime_statistics() -> None:
    described = {
        "@type": "sourceDescription",
        "sourceDescription": {
            "name": "BIG",
            "type": "STREAM",
            "extended": True,
            "fields": [],
            "readQueries": [],
            "writeQueries": [
                {"id": "CSAS_BIG_1", "state": "RUNNING", "queryString": "CREATE STREAM big AS ..."}
            ],
            "statistics": "messages-written: 3",
            "errorStats": "processing-errors: 1",
        },
    }
    text = render(Entity(described, entity_table(described)), OutputFormat.TABLE).text
    assert "Queries that write from this STREAM" in text
    assert "CSAS_BIG_1 (RUNNING) : CREATE STREAM big AS ..." in text
    assert "messages-written: 3" in text and "processing-errors: 1" in text


def test_show_queries_extended_is_a_table() -> None:
    shown = {
        "@type": "query_descriptions",
        "queryDescriptions": [{**EXPLAINED["queryDescription"], "state": "RUNNING"}],
    }  # type: ignore[dict-item]
    text = render(Entity(shown, entity_table(shown)), OutputFormat.TABLE).text
    assert "CSAS_BIG_1" in text and "RUNNING" in text and "bad JSON" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (-122.4205, "-122.4205"),
        (1.0, "1.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e7, "1.0E7"),
        (1234567.0, "1234567.0"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (123456789.0, "1.23456789E8"),
        (1e21, "1.0E21"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_doubles_show_as_javas_double_to_string(value: float, shown: str) -> None:
    assert format_double(value) == shown
    assert cell(value) == shown


def test_the_table_shows_values_exactly() -> None:
    table = _table(["D", "N"], [[-122.4205, Decimal("12.50")], [1.0, Decimal("0.00000001")]])
    assert "-122.4205" in table and "12.50" in table and "0.00000001" in table
    assert "| 1.0 " in table  # not rounded, not shortened to 1
