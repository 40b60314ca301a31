"""The driver over real sockets: failover between server URLs, timeouts, 429 with Retry-After,
503, and a `/query` answer that arrives chunk by chunk. Plus the pure retry decisions.

The servers are stdlib `http.server`s on 127.0.0.1, port 0, each in a thread started and stopped
by the `servers` fixture; each answers from a script of actions. Answer bodies follow the shapes of
ksqlDB docs developer-guide/ksqldb-rest-api/{ksql,query}-endpoint.md (written by hand).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from headwater import dbapi
from headwater.dbapi._retry import Failure, FailureKind, RetryPolicy, Step, plan_retry

Action = Callable[[BaseHTTPRequestHandler], None]

STATUS = [
    {
        "@type": "currentStatus",
        "statementText": "SHOW STREAMS;",
        "commandId": "c",
        "commandStatus": {"status": "SUCCESS", "message": "ok"},
        "commandSequenceNumber": 1,
    }
]
PULL = [
    {"header": {"queryId": "q1", "schema": "`ID` STRING KEY, `N` BIGINT"}},
    {"row": {"columns": ["a", 1]}},
    {"row": {"columns": ["b", 2]}},
    {"finalMessage": "Query Completed"},
]


def reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Action:
    def act(handler: BaseHTTPRequestHandler) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    return act


class Script:
    """What one server answers, in order (the last action repeats), and what it was asked."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = actions
        self.requests: list[tuple[str, str, float]] = []
        self.release = threading.Event()  # ends every wait when the test is over

    def next(self) -> Action:
        return self.actions.pop(0) if len(self.actions) > 1 else self.actions[0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        script = self.server.script
        script.requests.append((self.command, self.path, time.monotonic()))
        json.loads(body or "null")
        script.next()(self)

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    script: Script

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout tests) is expected


Start = Callable[[list[Action]], tuple[str, Script]]


@pytest.fixture
def servers() -> Iterator[Start]:
    """Start HTTP servers on 127.0.0.1:0 in threads; stop them all at the end."""
    started: list[tuple[_Server, threading.Thread]] = []

    def start(actions: list[Action]) -> tuple[str, Script]:
        server = _Server(("127.0.0.1", 0), Handler)
        server.script = Script(actions)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        started.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}", server.script

    yield start
    for server, thread in started:
        server.script.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def refused_url() -> str:
    """A URL nobody listens on: bind a port, then free it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_failover_from_a_down_server_to_the_next(servers: Start) -> None:
    up, script = servers([reply(200, STATUS), reply(200, PULL)])
    down = refused_url()
    with dbapi.connect([down, up], retries=0, connect_timeout=1.0) as conn:
        cur = conn.cursor()
        cur.execute("SHOW STREAMS;")
        assert cur.fetchone() == ("c", "SUCCESS", "ok")
        assert conn.server_url == up  # remembered: the next request goes there first
        cur.execute("SELECT * FROM t;")
        assert cur.fetchall() == [("a", 1), ("b", 2)]
    assert [path for _, path, _ in script.requests] == ["/ksql", "/query"]


def test_503_moves_to_the_next_server_and_sticks_there(servers: Start) -> None:
    unavailable = reply(
        503, {"@type": "generic_error", "error_code": 50303, "message": "shutting down"}
    )
    first, first_script = servers([unavailable])
    second, second_script = servers([reply(200, PULL)])
    with dbapi.connect([first, second], retries=0) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM t WHERE id = ?;", ["a"])
        assert cur.fetchall() == [("a", 1), ("b", 2)]
        cur.execute("SELECT * FROM t;")
        assert cur.fetchall() == [("a", 1), ("b", 2)]
    assert len(first_script.requests) == 1
    assert len(second_script.requests) == 2


def test_every_server_down_is_an_operational_error(servers: Start) -> None:
    unavailable = reply(
        503, {"@type": "generic_error", "error_code": 50302, "message": "not ready"}
    )
    url, script = servers([unavailable])
    with (
        dbapi.connect([refused_url(), url], retries=1, connect_timeout=1.0) as conn,
        pytest.raises(dbapi.OperationalError) as info,
    ):
        conn.cursor().execute("SHOW STREAMS;")
    assert info.value.retriable
    assert len(script.requests) == 2  # two rounds over two servers


def test_429_waits_for_retry_after_then_succeeds(servers: Start) -> None:
    throttled = reply(
        429,
        {"@type": "generic_error", "error_code": 42900, "message": "busy"},
        {"Retry-After": "1"},
    )
    url, script = servers([throttled, reply(200, STATUS)])
    with dbapi.connect(url) as conn:
        conn.cursor().execute("SHOW STREAMS;")
    (_, _, t1), (_, _, t2) = script.requests
    assert t2 - t1 >= 0.95


def test_429_with_a_retry_after_beyond_the_bound_fails_at_once(servers: Start) -> None:
    throttled = reply(
        429,
        {"@type": "generic_error", "error_code": 42900, "message": "busy"},
        {"Retry-After": "60"},
    )
    url, script = servers([throttled])
    start = time.monotonic()
    with (
        dbapi.connect(url, max_retry_after=5) as conn,
        pytest.raises(dbapi.TooManyRequestsError, match="busy") as info,
    ):
        conn.cursor().execute("SHOW STREAMS;")
    assert time.monotonic() - start < 2
    assert info.value.error_code == 42900 and info.value.http_status == 429
    assert len(script.requests) == 1


def test_read_timeout(servers: Start) -> None:
    def stall(handler: BaseHTTPRequestHandler) -> None:
        handler.server.script.release.wait(10)  # type: ignore[attr-defined]

    url, script = servers([stall])
    start = time.monotonic()
    with (
        dbapi.connect(url, timeout=0.3, retries=3) as conn,
        pytest.raises(dbapi.OperationalError, match="no answer"),
    ):
        conn.cursor().execute("CREATE STREAM s (id INT KEY) WITH (kafka_topic='s');")
    assert time.monotonic() - start < 2
    assert len(script.requests) == 1  # a statement is never sent twice after a timeout


def test_query_rows_arrive_before_the_answer_is_complete(servers: Start) -> None:
    more_rows = threading.Event()

    def chunked(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(text: str) -> None:
            data = text.encode()
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        chunk("[" + json.dumps(PULL[0]) + ",\n" + json.dumps(PULL[1]) + ",\n")
        more_rows.wait(10)  # the client must get the header and first row before this
        chunk(json.dumps(PULL[2]) + ',\n{"servedBy": [{"partition": 0, "host": "h", "position": 7,')
        chunk(' "lag": 0}]},\n' + json.dumps(PULL[3]) + "]")
        handler.wfile.write(b"0\r\n\r\n")

    url, _ = servers([chunked])
    with dbapi.connect(url, timeout=5) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM t;")
        assert [d[0] for d in cur.description or ()] == ["ID", "N"]
        assert cur.fetchone() == ("a", 1)
        assert not cur.served_by  # sent after the rows: not read yet
        more_rows.set()
        assert cur.fetchall() == [("b", 2)]
        assert cur.served_by == (dbapi.ServedBy(0, "h", 7, 0),)
        assert cur.rowcount == 2


# -- the pure retry decision -------------------------------------------------------------------------

POLICY = RetryPolicy(retries=1, backoff_s=0.1, max_backoff_s=0.15, max_retry_after_s=5.0)


@pytest.mark.parametrize(
    ("failure", "attempts", "servers", "idempotent", "step"),
    [
        (Failure(FailureKind.CONNECT), 1, 2, False, Step(0.0, failover=True)),
        (Failure(FailureKind.CONNECT), 2, 2, False, Step(0.1, failover=True)),
        (Failure(FailureKind.CONNECT), 4, 2, False, None),
        (Failure(FailureKind.UNAVAILABLE, 2.0), 1, 1, False, Step(0.1, failover=True)),  # at most
        (
            Failure(FailureKind.UNAVAILABLE, 0.05),
            1,
            1,
            False,
            Step(0.05, failover=True),
        ),  # its hint
        (Failure(FailureKind.UNAVAILABLE, 9.0), 1, 1, False, None),
        (Failure(FailureKind.NO_ANSWER), 1, 2, False, None),
        (Failure(FailureKind.NO_ANSWER), 1, 2, True, Step(0.0, failover=True)),
        (Failure(FailureKind.THROTTLED, 3.0), 1, 2, False, Step(3.0, failover=False)),
        (Failure(FailureKind.THROTTLED), 1, 1, False, Step(0.1, failover=False)),
        (Failure(FailureKind.THROTTLED, 6.0), 1, 1, False, None),
        (Failure(FailureKind.THROTTLED, 1.0), 2, 1, False, None),
    ],
)
def test_plan_retry(
    failure: Failure, attempts: int, servers: int, idempotent: bool, step: Step | None
) -> None:
    assert (
        plan_retry(
            failure, attempts=attempts, servers=servers, idempotent=idempotent, policy=POLICY
        )
        == step
    )


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(retries=10, backoff_s=0.1, max_backoff_s=0.3)
    delays = [
        plan_retry(
            Failure(FailureKind.CONNECT), attempts=n, servers=1, idempotent=True, policy=policy
        )
        for n in (1, 2, 3)
    ]
    assert [d.delay_s if d else None for d in delays] == [0.1, 0.2, 0.3]
