"""Request bounds (issue 21, item 1): statement size, tokens, depth and count; a pull query's time
budget and a scan's row bound; scans streamed in chunks and limited in concurrency."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from headwater.gateway.admission import Admission
from headwater.gateway.app import create_app
from headwater.gateway.errors import KsqlError
from headwater.gateway.query import _array_chunks, _line_chunks
from headwater.gateway.services import Limits, PullSettings, Services
from headwater.sqlparse_ext import ParseError, parse
from headwater.sqlparse_ext.limits import ParseLimits

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

pytestmark = pytest.mark.kafka

LIMITS = ParseLimits(max_statement_chars=3000, max_tokens=400, max_depth=20, max_statements=5)
ROWS = 40


# -- pure ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment", "position"),
    [
        ("SELECT " + "X, " * 1500 + "Y FROM T;", "at most 3,000 characters", (1, 1)),
        ("SELECT " + "X, " * 300 + "Y FROM T;", "at most 400 tokens, found 605", (1, 606)),
        ("SELECT " + "(" * 30 + "X" + ")" * 30 + " FROM T;", "nested at most 20 deep", (1, 28)),
        ("SELECT " + "+".join(["X"] * 40) + " FROM T;", "nested at most 20 deep", None),
        ("SHOW STREAMS;\n" * 6, "at most 5 statements in one request, found 6", (6, 1)),
    ],
)
def test_each_bound_refuses_with_its_setting_and_position(
    text: str, fragment: str, position: tuple[int, int] | None
) -> None:
    with pytest.raises(ParseError) as refused:
        parse(text, limits=LIMITS)
    assert fragment in refused.value.message and "(setting ksql." in refused.value.message
    if position is not None:
        assert (refused.value.line, refused.value.column) == position
    parse(text)  # without bounds (the command log, forwarded texts) the same text parses


def test_statements_within_the_bounds_parse() -> None:
    text = ("SELECT " + "+".join(["X"] * 15) + ", ARRAY[1, 2][1] FROM T WHERE (A = 1);") * 5
    assert len(parse(text, limits=LIMITS)) == 5


@pytest.mark.parametrize("count", [0, 1, 999, 1000, 2500])
def test_streamed_chunks_make_valid_json(count: int) -> None:
    items = [{"row": {"columns": [i, "a\nb"]}} for i in range(count)]
    assert json.loads(b"".join(_array_chunks(iter(items)))) == items
    lines = b"".join(_line_chunks(iter(items))).splitlines()
    assert [json.loads(line) for line in lines] == items


def test_an_admission_slot_is_held_until_released() -> None:
    async def scenario() -> None:
        gate = Admission(running=1, waiting=0, what="table scans")
        await gate.acquire()
        with pytest.raises(KsqlError) as full:
            await gate.acquire()
        assert full.value.error_code == 42900 and "table scans" in full.value.message
        gate.release()
        await gate.acquire()
        gate.release()

    asyncio.run(scenario())


@pytest.fixture
def slow_server(request: pytest.FixtureRequest) -> Iterator[int]:
    """An HTTP server (granian, as the node runs) whose one route reads its body within 0.5 s;
    ``@pytest.mark.parametrize("slow_server", [{"max_connections": N}], indirect=True)`` sets
    its settings."""
    import threading

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from headwater.gateway.app import EXCEPTION_HANDLERS
    from headwater.gateway.ksql import read_body
    from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
    from headwater.kafka._ports import free_port

    async def echo(request: Request) -> Response:
        return Response(await read_body(request, 1000, timeout_s=0.5))

    app = Starlette(
        routes=[Route("/", echo, methods=["POST"])], exception_handlers=EXCEPTION_HANDLERS
    )
    settings = {"header_read_timeout_s": 1.0, **getattr(request, "param", {})}
    server = HttpServer(
        app,
        HttpServerSettings(
            port=free_port(), kind=HttpServerKind.GRANIAN, graceful_timeout_s=1.0, **settings
        ),
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(10)
    try:
        yield server.port
    finally:
        server.stop()
        thread.join(10)


def test_a_body_that_trickles_gets_408_and_idle_connections_close(slow_server: int) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", slow_server), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        began = time.monotonic()
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"did not arrive within 0.5 s" in answer and time.monotonic() - began < 3
    with socket.create_connection(("127.0.0.1", slow_server), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        began = time.monotonic()  # kept alive, then idle: closed after the header read timeout
        assert sock.recv(4096) == b"" and time.monotonic() - began < 3


@pytest.mark.parametrize(
    "slow_server", [{"max_connections": 3, "header_read_timeout_s": 10.0}], indirect=True
)
def test_connections_beyond_the_limit_wait_unanswered_until_one_closes(slow_server: int) -> None:
    """1,000 half-open connections were all held after 10 s (issue 21): now at most
    ``max_connections`` are open; the next ones wait in the listen backlog, costing the server
    nothing, and are served once a connection closes."""
    import socket

    held = [socket.create_connection(("127.0.0.1", slow_server), timeout=10) for _ in range(3)]
    time.sleep(0.3)  # accepted: each holds a permit, sending nothing
    with socket.create_connection(("127.0.0.1", slow_server), timeout=1) as waiting:
        waiting.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        with pytest.raises(TimeoutError):
            waiting.recv(4096)  # not accepted while three connections are open
        held.pop().close()
        waiting.settimeout(5)
        assert waiting.recv(4096).startswith(b"HTTP/1.1 200")
    for sock in held:
        sock.close()


# -- over HTTP -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services(
        "limits",
        limits=Limits(parse=LIMITS, scan_max_concurrent=1),
        pull=PullSettings(scan_max_rows=30),
    )


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def table(client: TestClient) -> str:
    name = f"T_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        "/ksql",
        json={
            "ksql": f"CREATE TABLE {name} (ID STRING PRIMARY KEY, "
            f"V BIGINT) WITH (kafka_topic='{name.lower()}', "
            "partitions=2, value_format='JSON');"
        },
    )
    assert created.status_code == 200, created.text
    for i in range(ROWS):
        inserted = client.post(
            "/ksql", json={"ksql": f"INSERT INTO {name} (ID, V) VALUES ('k{i:03d}', {i});"}
        )
        assert inserted.status_code == 200, inserted.text
    deadline = time.monotonic() + 15
    while True:
        keys = ", ".join(f"'k{i:03d}'" for i in range(ROWS))  # a key lookup: no row bound
        answer = _query(client, f"SELECT ID FROM {name} WHERE ID IN ({keys});")
        if len(_rows(answer)) == ROWS:
            return name
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)


def _query(client: TestClient, text: str, **properties: Any) -> Any:
    return client.post("/query", json={"ksql": text, "streamsProperties": properties})


def _rows(answer: Any) -> list[list[Any]]:
    assert answer.status_code == 200, answer.text
    return [item["row"]["columns"] for item in answer.json() if "row" in item]


def _error_item(answer: Any) -> dict[str, Any] | None:
    assert answer.status_code == 200, answer.text
    errors = [item["errorMessage"] for item in answer.json() if "errorMessage" in item]
    return errors[0] if errors else None


def test_over_http_a_bound_is_a_400_at_the_offending_token(client: TestClient, table: str) -> None:
    answer = _query(client, f"SELECT {'+'.join(['V'] * 30)} FROM {table};")
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error_code"] == 40001 and "ksql.statement.max.depth" in body["message"]
    many = client.post("/ksql", json={"ksql": "SHOW STREAMS;" * 6})
    assert many.status_code == 400 and "ksql.request.max.statements" in many.json()["message"]
    assert client.get("/info").status_code == 200


def test_a_scan_over_the_row_bound_ends_with_an_error_item(client: TestClient, table: str) -> None:
    answer = _query(client, f"SELECT * FROM {table};")
    error = _error_item(answer)
    assert error is not None and error["error_code"] == 40000, answer.text
    assert "more than 30 rows" in error["message"]
    assert "ksql.query.pull.table.scan.max.rows" in error["message"]
    assert len(_rows(answer)) == 30  # what was read before the bound, then the error
    # a LIMIT within the bound, or a key condition, answers in full
    assert len(_rows(_query(client, f"SELECT * FROM {table} LIMIT 25;"))) == 25
    assert _rows(_query(client, f"SELECT V FROM {table} WHERE ID = 'k007';")) == [[7]]
    # a request may lower the bound, never raise it
    lowered = _query(
        client, f"SELECT * FROM {table};", **{"ksql.query.pull.table.scan.max.rows": 5}
    )
    assert len(_rows(lowered)) == 5 and "more than 5 rows" in _error_item(lowered)["message"]
    raised = _query(
        client, f"SELECT * FROM {table};", **{"ksql.query.pull.table.scan.max.rows": 999}
    )
    assert "more than 30 rows" in _error_item(raised)["message"]


def test_the_query_stream_endpoint_streams_and_bounds_too(client: TestClient, table: str) -> None:
    answer = client.post(
        "/query-stream", json={"sql": f"SELECT ID, V FROM {table} WHERE ID < 'k010';"}
    )
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert lines[0]["columnNames"] == ["ID", "V"]
    assert sorted(lines[1:]) == sorted([f"k{i:03d}", i] for i in range(10))
    over = client.post("/query-stream", json={"sql": f"SELECT * FROM {table};"})
    last = json.loads(over.text.splitlines()[-1])
    assert last["errorMessage"]["error_code"] == 40000


def test_a_query_out_of_its_time_budget_stops_with_40800(client: TestClient, table: str) -> None:
    answer = _query(client, f"SELECT * FROM {table} LIMIT 20;", **{"ksql.query.pull.timeout.ms": 0})
    error = _error_item(answer)
    assert error is not None and error["error_code"] == 40800, answer.text
    assert "ksql.query.pull.timeout.ms" in error["message"]
    assert len(_rows(_query(client, f"SELECT * FROM {table} LIMIT 20;"))) == 20


def test_a_scan_releases_its_slot_when_its_answer_is_written(
    client: TestClient, services: Services, table: str
) -> None:
    for _ in range(5):  # one scan slot: a slot kept after an answer would make the next one wait
        assert len(_rows(_query(client, f"SELECT * FROM {table} LIMIT 3;"))) == 3
        assert _error_item(_query(client, f"SELECT * FROM {table};")) is not None
    assert services.scans.queued == 0
    assert services.scans._slots is not None and not services.scans._slots.locked()
