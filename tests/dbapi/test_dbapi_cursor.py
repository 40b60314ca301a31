"""The driver end to end over httpx.MockTransport: routing, request bodies, session state, result
sets, type conversion, fetch semantics and error mapping.

Recordings: no ksqlDB server runs here; each answer is written by hand from the shape named in its
comment (ksqlDB docs developer-guide/ksqldb-rest-api/{ksql,query}-endpoint.md, the error format of
the ksqlDB REST API reference, and headwater's docs/architecture.md "REST conventions" for servedBy and
the line/column error fields).
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from headwater import dbapi

Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]

# Shape: ksql-endpoint.md, "CREATE, DROP, TERMINATE" example response.
CREATED = {
    "@type": "currentStatus",
    "statementText": "CREATE STREAM ORDERS (ID STRING KEY, X INT) WITH (kafka_topic='orders');",
    "commandId": "stream/`ORDERS`/create",
    "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
    "commandSequenceNumber": 5,
    "warnings": [],
}

# Shape: query-endpoint.md (header, row.columns, finalMessage) plus headwater's servedBy item.
PULL = [
    {
        "header": {
            "queryId": "query_1700000000000",
            "schema": "`ID` STRING KEY, `TOTAL` DECIMAL(10, 2), `N` BIGINT, `AVG` DOUBLE, "
            "`DAY` DATE, `AT` TIMESTAMP, `RAW` BYTES, `TAGS` ARRAY<STRING>",
        }
    },
    {
        "row": {
            "columns": ["a", 12.30, 3, 1.5, "2024-05-01", "2024-05-01T10:00:00.000", "aGk=", ["x"]]
        },
        "sourceHost": "127.0.0.1:8088",
    },
    {"row": {"columns": ["b", 0.10, 4, 2.0, None, None, None, []]}},
    {"row": {"columns": ["c", 99999999.99, 5, 0.5, None, None, None, None]}},
    {
        "servedBy": [
            {"partition": 0, "host": "127.0.0.1:8088", "position": 1234, "lag": 0},
            {"partition": 1, "host": "127.0.0.1:8089", "position": 99, "lag": 3},
        ]
    },
    {"somethingNew": {"x": 1.5}},
    {"finalMessage": "Query Completed"},
]


class FakeServer:
    """A MockTransport handler: answers queued per path, and every request it saw."""

    def __init__(self, **answers: list[Answer]) -> None:
        self.answers = {"/" + path.replace("_", "/"): list(v) for path, v in answers.items()}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self.answers.get(request.url.path)
        assert queue, f"unexpected request to {request.url.path}"
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(request) if callable(answer) else answer

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.content]


def ok(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


def streamed(items: list[Any], chunk: int = 7, log: list[int] | None = None) -> httpx.Response:
    """A chunked JSON array, `chunk` bytes at a time; `log` records how many bytes were read."""
    data = json.dumps(items).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(data), chunk):
            if log is not None:
                log.append(start + chunk)
            yield data[start : start + chunk]

    return httpx.Response(200, content=chunks())


def error(status: int, **body: Any) -> httpx.Response:
    return httpx.Response(status, json=body)


def connect(server: FakeServer, **kwargs: Any) -> dbapi.Connection:
    return dbapi.connect("http://ksql:8088", transport=httpx.MockTransport(server), **kwargs)


# -- routing and request bodies ---------------------------------------------------------------------


def test_ddl_goes_to_ksql_and_returns_a_status_row() -> None:
    server = FakeServer(ksql=[ok([CREATED])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("CREATE STREAM orders (id STRING KEY, x INT) WITH (kafka_topic=?);", ["orders"])
        assert [d[0] for d in cur.description or ()] == ["Command ID", "Status", "Message"]
        assert cur.fetchall() == [("stream/`ORDERS`/create", "SUCCESS", "Stream created")]
        assert cur.rowcount == 1
        assert cur.entity == CREATED
        assert conn.command_sequence_number == 5
    request = server.requests[0]
    assert (request.method, request.url.path) == ("POST", "/ksql")
    assert request.headers["content-type"] == "application/vnd.ksql.v1+json"
    assert "application/vnd.ksql.v1+json" in request.headers["accept"]
    assert server.bodies() == [
        {
            "ksql": "CREATE STREAM orders (id STRING KEY, x INT) WITH (kafka_topic=?);",
            "streamsProperties": {},
            "sessionVariables": {},
            "parameters": ["orders"],
        }
    ]


@pytest.mark.parametrize(
    ("sql", "path"),
    [
        ("SELECT * FROM t;", "/query"),
        ("  -- pull\n/* q */ select * from t;", "/query"),
        ("CREATE TABLE t2 AS SELECT * FROM t;", "/ksql"),
        ("INSERT INTO s SELECT * FROM t;", "/ksql"),
        ("/* SELECT */ SHOW STREAMS;", "/ksql"),
    ],
)
def test_select_goes_to_query_everything_else_to_ksql(sql: str, path: str) -> None:
    server = FakeServer(ksql=[ok([])], query=[ok(PULL)])
    with connect(server) as conn:
        conn.cursor().execute(sql)
    assert [r.url.path for r in server.requests] == [path]


def test_session_state_travels_with_every_request() -> None:
    server = FakeServer(ksql=[ok([CREATED]), ok([])], query=[ok(PULL)])
    conn = connect(server, properties={"acceptable.offset.lag": 100}, session_variables={"t": "o"})
    cur = conn.cursor()
    cur.execute("CREATE STREAM orders (id STRING KEY) WITH (kafka_topic='${t}');")
    conn.set_property("ksql.streams.auto.offset.reset", "earliest")
    conn.unset_property("acceptable.offset.lag")
    conn.unset_property("never.set")
    conn.set_variable("env", "prod")
    conn.unset_variable("t")
    cur.execute("SELECT * FROM orders WHERE id = ?;", ["a"])
    cur.execute("SHOW STREAMS;")
    first, second, third = server.bodies()
    assert first["streamsProperties"] == {"acceptable.offset.lag": 100}
    assert first["sessionVariables"] == {"t": "o"}
    assert "commandSequenceNumber" not in first
    assert second == {
        "ksql": "SELECT * FROM orders WHERE id = ?;",
        "streamsProperties": {"ksql.streams.auto.offset.reset": "earliest"},
        "sessionVariables": {"env": "prod"},
        "commandSequenceNumber": 5,
        "parameters": ["a"],
    }
    assert third["commandSequenceNumber"] == 5
    assert dict(conn.properties) == {"ksql.streams.auto.offset.reset": "earliest"}
    assert dict(conn.session_variables) == {"env": "prod"}
    with pytest.raises(TypeError):
        conn.properties["x"] = 1  # type: ignore[index]


def test_command_sequence_number_only_grows() -> None:
    older = dict(CREATED, commandSequenceNumber=3)
    failed = dict(CREATED, commandSequenceNumber=-1)
    server = FakeServer(ksql=[ok([CREATED]), ok([older, failed])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("CREATE STREAM a (id INT KEY) WITH (kafka_topic='a');")
        cur.execute("CREATE STREAM b (id INT KEY) WITH (kafka_topic='b');")
        assert conn.command_sequence_number == 5


def test_bad_parameters_raise_programming_error_and_send_nothing() -> None:
    server = FakeServer(ksql=[ok([])])
    with connect(server) as conn:
        cur = conn.cursor()
        for sql, params in [
            ("SELECT ? FROM t;", []),
            ("SELECT ? FROM t;", [1, 2]),
            ("SELECT ? FROM t;", [float("nan")]),
            ("SELECT ? FROM t;", [object()]),
            ("SELECT ? FROM t;", {"a": 1}),
            ("SELECT ? FROM t;", "a"),
        ]:
            with pytest.raises(dbapi.ProgrammingError):
                cur.execute(sql, params)  # type: ignore[arg-type]
        with pytest.raises(dbapi.ProgrammingError):
            cur.execute(b"SHOW STREAMS;")  # type: ignore[arg-type]
    assert server.requests == []


def test_unserialisable_property_is_a_programming_error() -> None:
    server = FakeServer(ksql=[ok([])])
    with (
        connect(server, properties={"x": object()}) as conn,
        pytest.raises(dbapi.ProgrammingError, match="JSON"),
    ):
        conn.cursor().execute("SHOW STREAMS;")


def test_parameters_travel_apart_from_the_text() -> None:
    # the server binds them after substituting ${...}: a value is never read as SQL or a variable
    server = FakeServer(query=[ok(PULL)])
    with connect(server, session_variables={"who": "bob' OR id <> '"}) as conn:
        conn.cursor().execute("SELECT * FROM t WHERE id = ?;", ["x'; DROP STREAM t; --${who}"])
    body = server.bodies()[0]
    assert body["ksql"] == "SELECT * FROM t WHERE id = ?;"
    assert body["parameters"] == ["x'; DROP STREAM t; --${who}"]


def test_every_pep249_type_has_a_wire_form() -> None:
    server = FakeServer(ksql=[ok([CREATED])])
    values = [
        None,
        True,
        3,
        1.5,
        decimal.Decimal("1.10"),
        "s",
        b"\x00\x01",
        datetime.date(2024, 5, 1),
        datetime.datetime(2024, 5, 1, 10, 0),
        [1, 2],
        {"k": "v"},
    ]
    with connect(server) as conn:
        conn.cursor().execute(
            "INSERT INTO t VALUES (" + ", ".join("?" * len(values)) + ");", values
        )
    assert server.bodies()[0]["parameters"] == [
        None,
        True,
        3,
        1.5,
        {"decimal": "1.10"},
        "s",
        {"bytes": "AAE="},
        "2024-05-01",
        "2024-05-01T10:00:00",
        [1, 2],
        {"map": [["k", "v"]]},
    ]


# -- /query results ---------------------------------------------------------------------------------


def test_pull_query_description_rows_and_served_by() -> None:
    server = FakeServer(query=[ok(PULL)])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM totals;")
        description = cur.description or ()
        assert [d.name for d in description] == [
            "ID",
            "TOTAL",
            "N",
            "AVG",
            "DAY",
            "AT",
            "RAW",
            "TAGS",
        ]
        codes = [d.type_code for d in description]
        assert codes == [
            "STRING",
            "DECIMAL(10, 2)",
            "BIGINT",
            "DOUBLE",
            "DATE",
            "TIMESTAMP",
            "BYTES",
            "ARRAY<STRING>",
        ]
        assert all(len(d) == 7 for d in description)
        assert description[1][4:6] == (10, 2)
        assert [
            codes[0] == dbapi.STRING,
            codes[1] == dbapi.NUMBER,
            codes[2] == dbapi.NUMBER,
            codes[5] == dbapi.DATETIME,
            codes[6] == dbapi.BINARY,
        ] == [True] * 5
        assert cur.query_id == "query_1700000000000"
        assert cur.rowcount == -1
        first = cur.fetchone()
        assert first == (
            "a",
            decimal.Decimal("12.30"),
            3,
            1.5,
            datetime.date(2024, 5, 1),
            datetime.datetime(2024, 5, 1, 10),
            b"hi",
            ["x"],
        )
        assert first is not None and type(first[1]) is decimal.Decimal and type(first[3]) is float
        rest = cur.fetchall()
        assert [r[0] for r in rest] == ["b", "c"]
        assert rest[0][1] == decimal.Decimal("0.10")
        assert rest[1][1] == decimal.Decimal("99999999.99")  # no float rounding
        assert cur.fetchone() is None
        assert cur.fetchall() == []
        assert cur.rowcount == 3
        assert cur.served_by == (
            dbapi.ServedBy(0, "127.0.0.1:8088", 1234, 0),
            dbapi.ServedBy(1, "127.0.0.1:8089", 99, 3),
        )
        assert cur.extras == ({"somethingNew": {"x": 1.5}},)
        assert cur.final_message == "Query Completed"
        assert cur.entity is None


def test_fetchmany_arraysize_and_iteration() -> None:
    server = FakeServer(query=[ok(PULL)])
    with connect(server) as conn:
        cur = conn.cursor()
        assert cur.arraysize == 1
        cur.execute("SELECT * FROM totals;")
        assert [r[0] for r in cur.fetchmany()] == ["a"]
        cur.arraysize = 5
        assert [r[0] for r in cur.fetchmany(1)] == ["b"]
        assert [r[0] for r in cur.fetchmany()] == ["c"]
        assert cur.fetchmany() == []
        cur.execute("SELECT * FROM totals;")
        assert [row[0] for row in cur] == ["a", "b", "c"]
        assert iter(cur) is cur
        with pytest.raises(dbapi.ProgrammingError):
            cur.fetchmany(-1)


def test_rows_are_read_from_the_stream_as_they_are_fetched() -> None:
    log: list[int] = []
    server = FakeServer(query=[streamed(PULL, chunk=16, log=log)])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM totals;")
        after_header = len(log)
        total = len(json.dumps(PULL))
        assert after_header * 16 < total  # execute read the header, not the whole answer
        assert cur.fetchone() is not None
        assert len(log) > after_header
        assert len(cur.fetchall()) == 2
        assert cur.served_by and cur.final_message == "Query Completed"


def test_error_message_in_the_stream_raises_after_the_rows_before_it() -> None:
    items = PULL[:2] + [
        {
            "errorMessage": {
                "@type": "generic_error",
                "error_code": 50000,
                "message": "store went away",
            }
        }
    ]
    server = FakeServer(query=[streamed(items)])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM totals;")
        with pytest.raises(dbapi.InternalError, match="store went away") as info:
            cur.fetchmany(5)
        assert info.value.error_code == 50000
        assert [r[0] for r in cur.fetchmany(5)] == ["a"]  # the row read before the error is kept
        with pytest.raises(dbapi.InternalError):
            cur.fetchone()


def test_connection_cut_mid_stream_is_an_operational_error() -> None:
    data = json.dumps(PULL).encode()
    cut = data.index(b'{"row": {"columns": ["c"')

    def chunks() -> Iterator[bytes]:
        yield data[:cut]
        raise httpx.ReadError("connection reset")

    server = FakeServer(query=[httpx.Response(200, content=chunks())])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM totals;")
        with pytest.raises(dbapi.OperationalError, match="cut off"):
            cur.fetchall()
        assert [r[0] for r in cur.fetchall()] == ["a", "b"]
        with pytest.raises(dbapi.OperationalError):
            cur.fetchall()


@pytest.mark.parametrize(
    ("items", "error"),
    [
        ([], dbapi.InterfaceError),
        ([{"row": {"columns": [1]}}], dbapi.InterfaceError),
        ([PULL[0], {"row": {"columns": ["too few"]}}], dbapi.DataError),
        ([PULL[0], {"servedBy": "nobody"}], dbapi.InterfaceError),
        (
            [{"header": {"queryId": "q", "schema": "`ID` STRING KEY", "writtenBy": [{}]}}],
            dbapi.InterfaceError,
        ),
    ],
)
def test_malformed_query_answers(items: list[Any], error: type[Exception]) -> None:
    server = FakeServer(query=[ok(items)])
    with connect(server) as conn:
        cur = conn.cursor()
        with pytest.raises(error):
            cur.execute("SELECT * FROM totals;")
            cur.fetchall()


def test_query_answer_that_is_not_json() -> None:
    server = FakeServer(query=[httpx.Response(200, text="<html>proxy</html>")])
    with connect(server) as conn, pytest.raises(dbapi.InterfaceError, match="cannot read"):
        conn.cursor().execute("SELECT * FROM totals;")


# -- /ksql results ------------------------------------------------------------------------------------


def test_several_statements_give_several_result_sets() -> None:
    # Shape: ksql-endpoint.md (one entity per statement, common "warnings") and VariablesList.
    variables = {
        "@type": "variables",
        "statementText": "SHOW VARIABLES;",
        "variables": [{"name": "env", "value": "prod"}],
        "warnings": [{"message": "variable env shadows a property"}],
    }
    server = FakeServer(ksql=[ok([CREATED, variables])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute(
            "CREATE STREAM orders (id STRING KEY) WITH (kafka_topic='orders'); SHOW VARIABLES;"
        )
        assert cur.entities == (CREATED, variables)
        assert cur.fetchone() == ("stream/`ORDERS`/create", "SUCCESS", "Stream created")
        assert cur.messages == [(dbapi.Warning, "variable env shadows a property")]
        assert cur.nextset() is True
        assert cur.description is not None and cur.description[0][0] == "Variable Name"
        assert cur.entity == variables
        assert cur.fetchall() == [("env", "prod")]
        assert cur.nextset() is None
        assert cur.description is None
        with pytest.raises(dbapi.ProgrammingError):
            cur.fetchall()


def test_entity_without_a_table_view_has_no_description() -> None:
    raw = {"@type": "connector_list", "statementText": "SHOW CONNECTORS;", "connectors": []}
    server = FakeServer(ksql=[ok([raw])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SHOW CONNECTORS;")
        assert cur.description is None
        assert cur.entity == raw
        assert cur.rowcount == -1
        with pytest.raises(dbapi.ProgrammingError, match="no result set"):
            cur.fetchone()


def test_ksql_answer_that_is_not_a_list_of_entities() -> None:
    server = FakeServer(ksql=[ok({"oops": 1})])
    with connect(server) as conn, pytest.raises(dbapi.InterfaceError):
        conn.cursor().execute("SHOW STREAMS;")


def test_executemany_runs_each_parameter_set() -> None:
    server = FakeServer(ksql=[ok([CREATED])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.executemany("INSERT INTO orders (id, x) VALUES (?, ?);", [("a", 1), ("b", -2)])
        assert [(b["ksql"], b["parameters"]) for b in server.bodies()] == [
            ("INSERT INTO orders (id, x) VALUES (?, ?);", ["a", 1]),
            ("INSERT INTO orders (id, x) VALUES (?, ?);", ["b", -2]),
        ]
        assert cur.rowcount == 2


# -- errors ---------------------------------------------------------------------------------------------


def test_statement_error_carries_the_server_fields() -> None:
    # Shape: ksql-endpoint.md "Errors" (error_code, message, statementText, entities) plus
    # headwater's line/column.
    body = {
        "@type": "statement_error",
        "error_code": 40001,
        "message": "line 1:15: mismatched input 'FRM' expecting ';'",
        "statementText": "SHOW STREAMS FRM;",
        "entities": [CREATED],
        "line": 1,
        "column": 15,
    }
    server = FakeServer(ksql=[error(400, **body)])
    with connect(server) as conn:
        with pytest.raises(dbapi.ProgrammingError) as info:
            conn.cursor().execute("CREATE STREAM ...; SHOW STREAMS FRM;")
        exc = info.value
        assert isinstance(exc, dbapi.StatementError)
        assert (exc.error_code, exc.http_status, exc.line, exc.column) == (40001, 400, 1, 15)
        assert exc.statement_text == "SHOW STREAMS FRM;"
        assert exc.entities == (CREATED,)
        assert "error 40001, line 1:15" in str(exc)
        assert conn.command_sequence_number == 5  # the statement that did run counts


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (
            400,
            {"@type": "statement_error", "error_code": 40002, "message": "use /query"},
            dbapi.StatementError,
            40002,
        ),
        (
            404,
            {"@type": "generic_error", "error_code": 40400, "message": "no ORDERS"},
            dbapi.NotFoundError,
            40400,
        ),
        (
            401,
            {"@type": "generic_error", "error_code": 40100, "message": "who?"},
            dbapi.AuthorizationError,
            40100,
        ),
        (403, {}, dbapi.AuthorizationError, 40300),
        (
            500,
            {"@type": "generic_error", "error_code": 50000, "message": "bug"},
            dbapi.InternalError,
            50000,
        ),
        (502, {}, dbapi.OperationalError, 50200),
        (409, {"message": "conflict"}, dbapi.ProgrammingError, 40900),
    ],
)
def test_error_codes_map_to_the_pep_249_tree(
    status: int, body: dict[str, Any], cls: type[dbapi.Error], code: int
) -> None:
    server = FakeServer(ksql=[error(status, **body)])
    with connect(server) as conn, pytest.raises(cls) as info:
        conn.cursor().execute("SHOW STREAMS;")
    assert info.value.error_code == code
    assert info.value.http_status == status
    assert str(info.value)


def test_non_json_error_body_keeps_its_text() -> None:
    server = FakeServer(ksql=[httpx.Response(502, text="Bad Gateway from the proxy")])
    with (
        connect(server) as conn,
        pytest.raises(dbapi.OperationalError, match="Bad Gateway from the proxy"),
    ):
        conn.cursor().execute("SHOW STREAMS;")


def test_query_errors_are_raised_by_execute() -> None:
    body = {"@type": "statement_error", "error_code": 40001, "message": "no such column X"}
    server = FakeServer(query=[error(400, **body)])
    with connect(server) as conn:
        cur = conn.cursor()
        with pytest.raises(dbapi.StatementError, match="no such column X"):
            cur.execute("SELECT x FROM t;")
        assert cur.description is None


def test_429_and_503_are_retried_then_reported() -> None:
    throttled = httpx.Response(
        429,
        headers={"Retry-After": "0"},
        json={"@type": "generic_error", "error_code": 42900, "message": "queue full"},
    )
    server = FakeServer(ksql=[throttled, ok([CREATED])])
    with connect(server) as conn:
        conn.cursor().execute("SHOW STREAMS;")
    assert len(server.requests) == 2

    unavailable = error(503, error_code=50302, message="not ready")
    server = FakeServer(ksql=[unavailable])
    with (
        connect(server, retries=1) as conn,
        pytest.raises(dbapi.ServiceUnavailableError, match="not ready") as info,
    ):
        conn.cursor().execute("SHOW STREAMS;")
    assert info.value.error_code == 50302 and info.value.retriable
    assert len(server.requests) == 2


def test_httpx_errors_never_leak() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.UnsupportedProtocol("nope")

    with connect(FakeServer(ksql=[broken])) as conn, pytest.raises(dbapi.InterfaceError):
        conn.cursor().execute("SHOW STREAMS;")

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with (
        connect(FakeServer(ksql=[refused]), retries=0) as conn,
        pytest.raises(dbapi.ConnectionFailedError, match="cannot connect"),
    ):
        conn.cursor().execute("SHOW STREAMS;")


def test_read_timeout_on_a_statement_is_not_retried() -> None:
    calls: list[str] = []

    def slow(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ReadTimeout("slow")

    with connect(FakeServer(ksql=[slow], query=[slow]), retries=2) as conn:
        with pytest.raises(dbapi.OperationalError, match="no answer"):
            conn.cursor().execute("CREATE STREAM s (id INT KEY) WITH (kafka_topic='s');")
        assert calls == ["/ksql"]  # it may have run: never sent twice
        with pytest.raises(dbapi.OperationalError):
            conn.cursor().execute("SELECT * FROM t;")
        assert calls.count("/query") == 3  # a pull query is safe to repeat


# -- lifecycle and server endpoints --------------------------------------------------------------------


def test_closed_cursor_and_connection_refuse_work() -> None:
    server = FakeServer(query=[ok(PULL)])
    conn = connect(server)
    cur = conn.cursor()
    with pytest.raises(dbapi.ProgrammingError):
        cur.fetchone()  # nothing executed yet
    assert cur.description is None and cur.rowcount == -1
    cur.execute("SELECT * FROM totals;")
    cur.close()
    for call in (cur.fetchone, cur.fetchall, lambda: cur.execute("SELECT 1;"), cur.nextset):
        with pytest.raises(dbapi.InterfaceError):
            call()
    other = conn.cursor()
    conn.commit()  # autocommit: nothing to do
    with pytest.raises(dbapi.NotSupportedError):
        conn.rollback()
    conn.close()
    conn.close()
    assert conn.closed
    for closed_call in (conn.cursor, conn.commit, lambda: other.execute("SELECT 1;")):
        with pytest.raises(dbapi.InterfaceError):
            closed_call()
    with pytest.raises(dbapi.InterfaceError):
        conn.server_info()


def test_setinputsizes_and_setoutputsize_do_nothing() -> None:
    with connect(FakeServer()) as conn:
        cur = conn.cursor()
        cur.setinputsizes([None])
        cur.setoutputsize(10)
        cur.setoutputsize(10, 0)
        assert cur.connection is conn
        assert cur.lastrowid is None


def test_server_info_and_healthcheck() -> None:
    # Shape: info-endpoint.md (KsqlServerInfo) and docs/architecture.md (/healthcheck).
    info = {
        "KsqlServerInfo": {
            "version": "0.1.0",
            "kafkaClusterId": "c1",
            "ksqlServiceId": "default_",
            "serverStatus": "RUNNING",
        }
    }
    health = {"isHealthy": True, "details": {"metastore": {"isHealthy": True}}}
    server = FakeServer(info=[ok(info)], healthcheck=[ok(health)])
    with connect(server) as conn:
        assert conn.server_info()["serverStatus"] == "RUNNING"
        assert conn.healthcheck()["isHealthy"] is True
    assert [r.method for r in server.requests] == ["GET", "GET"]
    with connect(FakeServer(info=[ok({"nope": 1})], healthcheck=[ok([])])) as conn:
        with pytest.raises(dbapi.InterfaceError):
            conn.server_info()
        with pytest.raises(dbapi.InterfaceError):
            conn.healthcheck()


def test_basic_auth_is_sent() -> None:
    server = FakeServer(ksql=[ok([])])
    with connect(server, auth=("user", "secret")) as conn:
        conn.cursor().execute("SHOW STREAMS;")
    assert server.requests[0].headers["authorization"].startswith("Basic ")


def test_served_by_is_read_from_the_header() -> None:
    # headwater's answers carry servedBy as an extra field of ksqlDB's header object
    header = {
        "header": {
            "queryId": "q",
            "schema": "`ID` STRING KEY",
            "servedBy": [{"partition": 1, "host": "h:1", "position": 5, "lag": 2}],
        }
    }
    server = FakeServer(query=[ok([header, {"row": {"columns": ["a"]}}])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM t WHERE id = 'a';")
        assert cur.fetchall() == [("a",)]
        assert [(s.partition, s.host, s.position, s.lag) for s in cur.served_by] == [
            (1, "h:1", 5, 2)
        ]
        assert cur.written_by == ()


def test_written_by_is_read_from_the_header() -> None:
    # a table written by persistent queries: each one's state and source lag, beside servedBy
    header = {
        "header": {
            "queryId": "q",
            "schema": "`ID` STRING KEY",
            "servedBy": [{"partition": 0, "host": "h:1", "position": 0, "lag": 0}],
            "writtenBy": [
                {"queryId": "CTAS_T_1", "state": "PENDING", "lag": None},
                {"queryId": "INSERTQUERY_2", "state": "RUNNING", "lag": 40},
            ],
        }
    }
    server = FakeServer(query=[ok([header])])
    with connect(server) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM t;")
        assert cur.fetchall() == []
        assert cur.written_by == (
            dbapi.WrittenBy("CTAS_T_1", "PENDING", None),
            dbapi.WrittenBy("INSERTQUERY_2", "RUNNING", 40),
        )
