"""The driver's push queries and PRINT: read lazily, with no read timeout, and ended on the server
when the cursor or connection closes.

First against a stdlib HTTP server (a thread on 127.0.0.1:0) that streams an unlimited push query
in ksqlDB's /query shape (written by hand from developer-guide/ksqldb-rest-api/query-endpoint.md)
until its client goes, and records /close-query; then against the real app (uvicorn, embedded
broker). Every wait is bounded: a driver that read the whole answer eagerly would hang, and the
tests fail on their deadlines instead.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

from headwater import dbapi
from headwater.gateway.app import create_app
from headwater.gateway.services import Limits, Services

T = TypeVar("T")
HEADER = {"header": {"queryId": "transient_q1", "schema": "`ID` STRING, `N` INTEGER"}}


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s result, failing the test if it takes longer than ``seconds``."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(("ok", call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert box, f"did not return within {seconds} s"
    kind, value = box[0]
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]


class PushServer(ThreadingHTTPServer):
    """Streams rows every ``period_s`` after ``first_row_after_s`` until the client goes."""

    def __init__(self, first_row_after_s: float = 0.0, period_s: float = 0.05) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.first_row_after_s = first_row_after_s
        self.period_s = period_s
        self.closed_queries: list[str] = []
        self.stream_ended = threading.Event()
        self.rows_sent = 0
        self.stop = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client going mid-stream is what these tests do


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PushServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path == "/close-query":
            self.server.closed_queries.append(body["queryId"])
            self.server.stop.set()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        printing = body["ksql"].lstrip().upper().startswith("PRINT")
        self.send_header("Content-Type", "text/plain" if printing else "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        if printing:
            self.send_header("X-Query-Id", "transient_p1")
        self.end_headers()

        def chunk(text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        try:
            if printing:
                chunk("Key format: KAFKA_STRING\nValue format: JSON\n\n")
            else:
                chunk("[" + json.dumps(HEADER) + ",\n")
            self.server.stop.wait(self.server.first_row_after_s)
            n = 0
            while not self.server.stop.is_set():
                n += 1
                chunk(
                    f"rowtime: N/A, key: k{n}, value: {n}, partition: 0\n\n"
                    if printing
                    else json.dumps({"row": {"columns": [f"k{n}", n]}}) + ",\n"
                )
                self.server.rows_sent = n
                self.server.stop.wait(self.server.period_s)
            if not printing:
                chunk('{"finalMessage": "Query Completed"}]')
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            self.server.stream_ended.set()


@pytest.fixture
def push_server() -> Iterator[Callable[..., tuple[str, PushServer]]]:
    started: list[tuple[PushServer, threading.Thread]] = []

    def start(**options: float) -> tuple[str, PushServer]:
        server = PushServer(**options)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        started.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}", server

    yield start
    for server, thread in started:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_unlimited_push_query_is_read_lazily_and_closed_on_the_server(push_server: Any) -> None:
    url, server = push_server()
    conn = dbapi.connect(url, timeout=5)
    cur = conn.cursor()
    within(5, lambda: cur.execute("SELECT ID, N FROM s EMIT CHANGES;"))
    assert cur.query_id == "transient_q1" and [d.name for d in cur.description or ()] == ["ID", "N"]
    assert within(5, cur.fetchone) == ("k1", 1)
    assert within(5, lambda: cur.fetchmany(2)) == [("k2", 2), ("k3", 3)]
    rows = within(5, lambda: [next(cur) for _ in range(3)])
    assert rows == [("k4", 4), ("k5", 5), ("k6", 6)]
    within(5, cur.close)
    assert server.closed_queries == ["transient_q1"]
    assert server.stream_ended.wait(5)
    conn.close()


def test_a_push_query_waits_for_rows_longer_than_the_read_timeout(push_server: Any) -> None:
    url, server = push_server(first_row_after_s=2.0)
    with dbapi.connect(url, timeout=0.5) as conn:
        cur = conn.cursor()
        started = time.monotonic()
        within(5, lambda: cur.execute("SELECT * FROM s EMIT CHANGES;"))
        assert time.monotonic() - started < 1.5  # execute did not wait for a row
        assert within(10, cur.fetchone) == ("k1", 1)  # after 2 s: no read timeout
    assert server.closed_queries == ["transient_q1"]  # the connection's close closed its cursor
    assert server.stream_ended.wait(5)


def test_a_pull_query_keeps_its_read_timeout(push_server: Any) -> None:
    url, _ = push_server(first_row_after_s=3.0)
    with dbapi.connect(url, timeout=0.5, retries=0) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM s;")
        with pytest.raises(dbapi.OperationalError):
            within(5, cur.fetchone)


def test_executing_again_ends_the_running_push_query(push_server: Any) -> None:
    url, server = push_server()
    with dbapi.connect(url, timeout=5) as conn:
        cur = conn.cursor()
        within(5, lambda: cur.execute("SELECT * FROM s EMIT CHANGES;"))
        assert within(5, cur.fetchone) == ("k1", 1)
        server.stop.clear()
        within(5, lambda: cur.execute("SELECT * FROM s EMIT CHANGES;"))
        assert server.closed_queries == ["transient_q1"]


def test_print_lines_are_rows_read_as_they_arrive(push_server: Any) -> None:
    url, server = push_server()
    with dbapi.connect(url, timeout=0.5) as conn:
        cur = conn.cursor()
        within(5, lambda: cur.execute("PRINT 'pageviews' FROM BEGINNING;"))
        assert [d.name for d in cur.description or ()] == ["PRINT"]
        assert cur.query_id == "transient_p1"
        lines = within(5, lambda: cur.fetchmany(3))
        assert lines == [
            ("Key format: KAFKA_STRING",),
            ("Value format: JSON",),
            ("rowtime: N/A, key: k1, value: 1, partition: 0",),
        ]
        time.sleep(0.7)  # longer than the read timeout
        assert within(5, cur.fetchone) == ("rowtime: N/A, key: k2, value: 2, partition: 0",)
        within(5, cur.close)
    assert server.closed_queries == ["transient_p1"]
    assert server.stream_ended.wait(5)


# -- against the real server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("dbapi-push", limits=Limits())


@pytest.fixture(params=["granian", "hypercorn", "uvicorn"])
def live(request: pytest.FixtureRequest, services: Services) -> Iterator[tuple[str, Any]]:
    """The app on a real server of each kind (headwater/http_server.py): its URL and its push
    queries."""
    from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
    from headwater.kafka._ports import free_port

    app = create_app(services)
    server = HttpServer(
        app,
        HttpServerSettings(
            port=free_port(), kind=HttpServerKind(request.param), graceful_timeout_s=1.0
        ),
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(10), "the server did not start"
    try:
        yield f"http://127.0.0.1:{server.port}", app.state.push_queries
    finally:
        server.stop()
        thread.join(10)


def _until_none_running(registry: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while registry.running():
        assert time.monotonic() < deadline, f"still running: {registry.running()}"
        time.sleep(0.05)


@pytest.mark.kafka
def test_push_query_and_print_through_the_driver_on_a_real_server(live: Any) -> None:
    url, registry = live
    name = f"D_{uuid.uuid4().hex[:6].upper()}"
    with dbapi.connect(url, timeout=2, properties={"auto.offset.reset": "earliest"}) as conn:
        cur = conn.cursor()
        cur.execute(
            f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic="
            f"'{name.lower()}', partitions=1, value_format='JSON');"
        )
        cur.execute(f"INSERT INTO {name} (ID, N) VALUES ('a', 1);")
        within(10, lambda: cur.execute(f"SELECT ID, N FROM {name} EMIT CHANGES;"))
        assert cur.query_id in registry.running()
        assert within(15, cur.fetchone) == ("a", 1)
        time.sleep(2.5)  # longer than the read timeout, no row: the query keeps running
        writer = conn.cursor()
        writer.execute(f"INSERT INTO {name} (ID, N) VALUES ('b', 2);")
        assert within(15, cur.fetchone) == ("b", 2)
        within(5, cur.close)
        _until_none_running(registry)

        printer = conn.cursor()
        within(10, lambda: printer.execute(f"PRINT '{name.lower()}' FROM BEGINNING;"))
        assert within(15, printer.fetchone) == ("Key format: KAFKA_STRING",)
        assert within(5, printer.fetchone) == ("Value format: JSON or KAFKA_STRING",)
        row = within(5, printer.fetchone)
        assert row is not None and row[0].endswith('key: a, value: {"N":1}, partition: 0')
        # the connection's close ends the PRINT too
    _until_none_running(registry)
