"""POST /inserts-stream: the pure row coercion and body splitting, the endpoint on a real runner
(embedded broker) driven through its ASGI interface chunk by chunk, and one request over a real
HTTP/1.1 server with a chunked body whose rows are acknowledged before the body ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from headwater.gateway.app import create_app
from headwater.gateway.inserts import (
    BodyLines,
    LineTooLong,
    RowError,
    coerce_json,
    identifier_text,
    row_values,
)
from headwater.gateway.services import Limits, PullSettings, Services
from headwater.kafka.broker import EmbeddedBroker
from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

INT, BIG, DBL = PrimitiveType("INTEGER"), PrimitiveType("BIGINT"), PrimitiveType("DOUBLE")
STR, BOOL, TS = PrimitiveType("STRING"), PrimitiveType("BOOLEAN"), PrimitiveType("TIMESTAMP")


# -- pure --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "target", "expected"),
    [
        (1, INT, 1),
        (1, BIG, 1),
        (2**40, BIG, 2**40),
        (1, DBL, 1.0),
        (1.5, DBL, 1.5),
        ("x", STR, "x"),
        (True, BOOL, True),
        (None, INT, None),
        (1.005, DecimalType(4, 2), Decimal("1.01")),
        ("12.345", DecimalType(5, 2), Decimal("12.35")),
        (3, DecimalType(4, 2), Decimal("3.00")),
        ("1970-01-01T00:00:01", TS, 1000),
        ("AQI=", PrimitiveType("BYTES"), b"\x01\x02"),
        ([1, None], ArrayType(INT), [1, None]),
        ({"1": 2}, MapType(STR, BIG), {"1": 2}),
        ({"a": 1}, StructType((StructField("A", INT), StructField("b", STR))), {"A": 1, "b": None}),
        ({"`b`": "v"}, StructType((StructField("b", STR),)), {"b": "v"}),
    ],
)
def test_json_values_coerce_to_column_types(value: Any, target: Any, expected: Any) -> None:
    assert coerce_json(value, target) == expected


@pytest.mark.parametrize(
    ("value", "target", "java"),
    [
        ("1", INT, "java.lang.String"),
        (2**40, INT, "java.lang.Long"),
        (1.5, INT, "java.lang.Double"),
        (1, STR, "java.lang.Integer"),
        (1, BOOL, "java.lang.Integer"),
        (True, INT, "java.lang.Boolean"),
        ([1], STR, "io.vertx.core.json.JsonArray"),
        ({"a": 1}, ArrayType(INT), "JsonObject"),
        ({"z": 1}, StructType((StructField("A", INT),)), "JsonObject"),
        (123.0, DecimalType(3, 2), "java.lang.Double"),
        ("nope", TS, "java.lang.String"),
    ],
)
def test_values_that_do_not_fit_are_refused_as_ksqldb_words_it(
    value: Any, target: Any, java: str
) -> None:
    with pytest.raises(RowError, match=f"Can't coerce a field of type class .*{java} into type"):
        coerce_json(value, target)


def test_names_are_identifiers_and_key_columns_are_required() -> None:
    assert identifier_text("name") == "NAME" and identifier_text("`name`") == "name"
    source = Source(
        SourceKind.STREAM,
        "S",
        (Column("ID", "STRING", key=True), Column("N", "INT"), Column("v", "DOUBLE")),
        "s",
        1,
    )
    assert row_values({"id": "a", "n": 1, "`v`": 2}, source, {}) == (("a",), {"N": 1, "v": 2.0})
    assert row_values({"ID": "a"}, source, {}) == (("a",), {"N": None, "v": None})
    with pytest.raises(RowError, match="Key field must be specified: ID"):
        row_values({"N": 1}, source, {})
    with pytest.raises(RowError, match="duplicate column / struct field name: N"):
        row_values({"ID": "a", "n": 1, "N": 2}, source, {})


def test_a_row_naming_an_unknown_or_header_column_is_refused_not_cut() -> None:
    source = Source(
        SourceKind.STREAM,
        "S",
        (
            Column("ID", "STRING", key=True),
            Column("N", "INT"),
            Column("H", "BYTES", header_key="h"),
        ),
        "s",
        1,
    )
    with pytest.raises(RowError) as refused:  # was: acked, with OTHER silently dropped
        row_values({"id": "a", "n": 1, "other": 0}, source, {})
    assert refused.value.message == "Column name `OTHER` does not exist."
    assert refused.value.error_code == 40000
    with pytest.raises(RowError, match="^Cannot insert into HEADER columns: H$"):
        row_values({"id": "a", "h": "eA=="}, source, {})


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_body_lines_split_anywhere_and_stay_bounded() -> None:
    async def run() -> None:
        lines = BodyLines(
            _chunks(b'{"target"', b': "S"}\n{"a":', b"1}\n\n{", b'"a":2}\n{"a":3}'), 100
        )
        assert await lines.first_line() == b'{"target": "S"}'
        assert await lines.next_batch() == [b'{"a":1}']
        assert await lines.next_batch() == [b'{"a":2}']
        assert await lines.next_batch() == [b'{"a":3}']  # the last line needs no newline
        assert await lines.next_batch() is None
        limited = BodyLines(_chunks(b"1\n2\n3\n"), 100)
        assert await limited.next_batch(2) == [b"1", b"2"]
        assert await limited.next_batch(2) == [b"3"]
        with pytest.raises(LineTooLong):
            await BodyLines(_chunks(b"x" * 60, b"y" * 60), 100).next_batch()

    asyncio.run(run())


# -- the endpoint on a real runner -------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services(
        "inserts", limits=Limits(max_body_bytes=4096), pull=PullSettings(table_scan_enabled=True)
    )


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _stream(client: TestClient) -> str:
    name = f"S_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        "/ksql",
        json={
            "ksql": (
                f"CREATE STREAM {name} (ID STRING KEY, N INT, PRICE DECIMAL(6, 2), TAGS ARRAY<STRING>) "
                f"WITH (kafka_topic='{name.lower()}', partitions=3, value_format='JSON');"
            )
        },
    )
    assert created.status_code == 200, created.text
    return name


def _rows(client: TestClient, text: str, count: int) -> list[list[Any]]:
    deadline = time.monotonic() + 15
    while True:
        answer = client.post("/query", json={"ksql": text})
        assert answer.status_code == 200, answer.text
        rows = [item["row"]["columns"] for item in answer.json() if "row" in item]
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def _body(target: str, *rows: Any) -> bytes:
    lines = [json.dumps({"target": target, "properties": {}})]
    lines += [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.kafka
def test_rows_are_written_like_insert_values_and_acked_in_order(
    client: TestClient, services: Services
) -> None:
    name = _stream(client)
    answer = client.post(
        "/inserts-stream",
        content=_body(
            name.lower(),
            {"id": "a", "n": 1, "price": 1.5, "tags": ["x"]},
            {"ID": "b", "N": "not a number"},
            "{not json",
            {"N": 3},
            {"ID": "z", "N": 4, "PRICE": "2.345"},
            {"ID": "y", "N": 5, "PRIZE": 9},
        ),
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/vnd.ksqlapi.delimited.v1")
    acks = [json.loads(line) for line in answer.text.splitlines()]
    assert acks == [
        {"status": "ok", "seq": 0},
        {
            "status": "error",
            "seq": 1,
            "error_code": 40000,
            "message": "Can't coerce a field of type class java.lang.String into type INTEGER",
        },
        {
            "status": "error",
            "seq": 2,
            "error_code": 40000,
            "message": "Invalid JSON in inserts stream",
        },
        {
            "status": "error",
            "seq": 3,
            "error_code": 40000,
            "message": "Key field must be specified: ID",
        },
        {"status": "ok", "seq": 4},
        {
            "status": "error",
            "seq": 5,
            "error_code": 40000,
            "message": "Column name `PRIZE` does not exist.",
        },
    ]
    rows = _rows(client, f"SELECT ID, N, PRICE, TAGS FROM {name};", 2)
    assert sorted(rows) == [["a", 1, 1.5, ["x"]], ["z", 4, 2.35, None]]

    # byte for byte (key, value, partition) what INSERT VALUES writes for the same rows
    twin = _stream(client)
    for values in ("('a', 1, 1.50, ARRAY['x'])", "('z', 4, 2.35, NULL)"):
        inserted = client.post(
            "/ksql", json={"ksql": f"INSERT INTO {twin} (ID, N, PRICE, TAGS) VALUES {values};"}
        )
        assert inserted.status_code == 200, inserted.text
    assert _records(services, name.lower(), 2) == _records(services, twin.lower(), 2)


def _records(services: Services, topic: str, count: int) -> list[tuple[Any, ...]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": services.settings.bootstrap_servers,
            "group.id": f"t-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        found: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 15
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                found.append((message.partition(), message.key(), message.value()))
        return sorted(found)
    finally:
        consumer.close()


@pytest.mark.kafka
def test_json_array_on_request_and_empty_streams(client: TestClient) -> None:
    name = _stream(client)
    answer = client.post(
        "/inserts-stream",
        content=_body(name, {"ID": "a"}, {"ID": "b"}),
        headers={"Accept": "application/json"},
    )
    assert answer.json() == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    empty = client.post(
        "/inserts-stream", content=_body(name), headers={"Accept": "application/json"}
    )
    assert empty.status_code == 200 and empty.json() == []
    assert client.post("/inserts-stream", content=_body(name)).text == ""


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        (
            _body("NO_SUCH_STREAM", {"ID": "a"}),
            40001,
            "Cannot insert values into an unknown stream/table: `NO_SUCH_STREAM`",
        ),
        (b"", 40000, "must start with a line"),
        (b"[1]\n", 40000, '"target" string'),
        (b"{oops\n", 40000, "Invalid JSON in request args"),
        (b'{"target": "X", "properties": 3}\n', 40000, '"properties" must be a JSON object'),
        (b"x" * 5000, 41300, "longer than 4096 bytes"),
    ],
)
def test_bad_requests_fail_whole(client: TestClient, body: bytes, code: int, fragment: str) -> None:
    answer = client.post("/inserts-stream", content=body)
    assert answer.status_code == code // 100, answer.text
    assert answer.json()["error_code"] == code and fragment in answer.json()["message"]


@pytest.mark.kafka
def test_a_row_longer_than_the_limit_ends_the_stream(client: TestClient) -> None:
    name = _stream(client)
    body = _body(name, {"ID": "a"}) + json.dumps({"ID": "b" * 5000}).encode() + b"\n"
    acks = [
        json.loads(line) for line in client.post("/inserts-stream", content=body).text.splitlines()
    ]
    assert acks[0] == {"status": "ok", "seq": 0}
    assert acks[1]["status"] == "error" and acks[1]["error_code"] == 41300 and len(acks) == 2


class _Asgi:
    """Drives the app through ASGI by hand: body chunks in when the test says, sends recorded."""

    def __init__(self, services: Services) -> None:
        self.app = create_app(services)
        self.body: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.received = 0
        self.disconnected = False
        self.send_gate = asyncio.Event()
        self.send_gate.set()

    async def receive(self) -> dict[str, Any]:
        chunk = await self.body.get()
        self.received += 1
        if self.disconnected:
            return {"type": "http.disconnect"}
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_gate.wait()
        self.sent.append(message)

    def acks(self) -> list[Any]:
        text = b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        return [json.loads(line) for line in text.decode().splitlines()]

    def run(self) -> asyncio.Task[None]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "path": "/inserts-stream",
            "raw_path": b"/inserts-stream",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"transfer-encoding", b"chunked")],
            "scheme": "http",
            "server": ("test", 80),
            "client": ("test", 1),
        }
        return asyncio.get_running_loop().create_task(self.app(scope, self.receive, self.send))  # type: ignore[arg-type]


async def _until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.kafka
def test_acks_are_sent_as_rows_arrive_before_the_body_ends(
    client: TestClient, services: Services
) -> None:
    name = _stream(client)

    async def run() -> None:
        asgi = _Asgi(services)
        task = asgi.run()
        await asgi.body.put(json.dumps({"target": name}).encode() + b"\n")
        await asgi.body.put(b'{"ID": "a", "N": 1}\n{"ID": ')  # a row split between chunks
        await _until(lambda: len(asgi.acks()) == 1)
        assert asgi.sent[0]["status"] == 200
        await asgi.body.put(b'"b", "N": 2}\n')
        await _until(lambda: len(asgi.acks()) == 2)
        await asgi.body.put(None)
        await asyncio.wait_for(task, 10)
        assert asgi.acks() == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
        assert asgi.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}

    asyncio.run(run())


@pytest.mark.kafka
def test_a_slow_reader_stops_the_body_being_read(client: TestClient, services: Services) -> None:
    name = _stream(client)

    async def run() -> None:
        asgi = _Asgi(services)
        task = asgi.run()
        await asgi.body.put(json.dumps({"target": name}).encode() + b"\n")
        await asgi.body.put(b'{"ID": "a"}\n')
        await _until(lambda: len(asgi.acks()) == 1)
        asgi.send_gate.clear()  # the client stops reading: send blocks
        for i in range(50):
            await asgi.body.put(json.dumps({"ID": f"k{i}"}).encode() + b"\n")
        await asyncio.sleep(1.0)
        # one more chunk read (its ack waits in send), the other 48 left unread with the client
        assert asgi.received <= 4 and asgi.body.qsize() >= 48
        asgi.send_gate.set()
        await asgi.body.put(None)
        await asyncio.wait_for(task, 20)
        assert [a["seq"] for a in asgi.acks()] == list(range(51))

    asyncio.run(run())


@pytest.mark.kafka
def test_a_client_that_goes_ends_the_request(client: TestClient, services: Services) -> None:
    name = _stream(client)

    async def run() -> None:
        asgi = _Asgi(services)
        task = asgi.run()
        await asgi.body.put(json.dumps({"target": name}).encode() + b"\n")
        await asgi.body.put(b'{"ID": "a"}\n')
        await _until(lambda: len(asgi.acks()) == 1)
        asgi.disconnected = True
        await asgi.body.put(b"")
        await asyncio.wait_for(task, 10)  # ends, without an answer's end or an error
        assert asgi.sent[-1]["more_body"] is True and len(asgi.acks()) == 1

    asyncio.run(run())


# -- over real servers: HTTP/1.1 chunked and HTTP/2 (h2c) ---------------------


@contextlib.contextmanager
def _serving(services: Services, kind: str) -> Iterator[int]:
    """The app on a real server of that kind (headwater/http_server.py); yields its port."""
    from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
    from headwater.kafka._ports import free_port

    server = HttpServer(
        create_app(services),
        HttpServerSettings(port=free_port(), kind=HttpServerKind(kind), graceful_timeout_s=1.0),
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(10), "the server did not start"
    try:
        yield server.port
    finally:
        server.stop()
        thread.join(10)


@pytest.fixture(params=["uvicorn", "hypercorn", "granian"])
def served(request: pytest.FixtureRequest, services: Services) -> Iterator[tuple[int, str]]:
    with _serving(services, request.param) as port:
        yield port, request.param


@pytest.mark.kafka
def test_chunked_request_over_http11_is_acked_row_by_row(
    client: TestClient, served: tuple[int, str]
) -> None:
    name = _stream(client)
    port, _kind = served
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        sock.makefile("rb") as reader,
    ):

        def chunk(data: bytes) -> None:
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

        sock.sendall(
            b"POST /inserts-stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk(json.dumps({"target": name}).encode() + b"\n")
        chunk(b'{"ID": "a", "N": 1}\n')
        status = reader.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        while reader.readline() not in (b"\r\n", b""):
            pass  # headers

        def next_item() -> Any:
            size = int(reader.readline().strip(), 16)
            data = reader.read(size)
            reader.readline()
            return json.loads(data) if data else next_item()

        assert next_item() == {"status": "ok", "seq": 0}  # before the body has ended
        chunk(b'{"ID": "b", "N": "x"}\n')
        assert next_item()["status"] == "error"
        chunk(b'{"ID": "c", "N": 3}\n')
        assert next_item() == {"status": "ok", "seq": 2}
        sock.sendall(b"0\r\n\r\n")
        assert reader.readline().strip() == b"0"  # the answer ends with the body


@pytest.mark.kafka
@pytest.mark.parametrize("kind", ["granian", "hypercorn"])
def test_http2_stream_is_acked_row_by_row(
    client: TestClient, services: Services, kind: str
) -> None:
    import h2.config
    import h2.connection
    import h2.events

    name = _stream(client)
    with (
        _serving(services, kind) as port,
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
    ):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":path", "/inserts-stream"),
                (":scheme", "http"),
                (":authority", "x"),
            ],
        )
        conn.send_data(stream, json.dumps({"target": name}).encode() + b"\n" + b'{"ID": "a"}\n')
        sock.sendall(conn.data_to_send())
        received = bytearray()
        status: list[bytes] = []
        ended = False

        def until(condition: Any) -> None:
            nonlocal ended
            deadline = time.monotonic() + 10
            while not condition():
                assert time.monotonic() < deadline, bytes(received)
                data = sock.recv(65536)
                assert data, "the server closed the connection"
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        status.extend(v for k, v in event.headers if k == b":status")
                    elif isinstance(event, h2.events.DataReceived):
                        received.extend(event.data)
                        conn.acknowledge_received_data(event.flow_controlled_length, stream)
                    elif isinstance(event, h2.events.StreamEnded):
                        ended = True
                sock.sendall(conn.data_to_send())

        until(lambda: received.count(b"\n") >= 1)  # the first ack, the request still open
        assert status == [b"200"] and not ended
        conn.send_data(stream, b'{"ID": "b"}\n', end_stream=True)
        sock.sendall(conn.data_to_send())
        until(lambda: ended)
        acks = [json.loads(line) for line in bytes(received).splitlines()]
        assert acks == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]


def test_body_lines_in_tiny_chunks() -> None:
    async def run() -> None:
        text = b'{"target": "S"}\n' + b"".join(b'{"a": %d}\n' % i for i in range(300))
        lines = BodyLines(_chunks(*(text[i : i + 1] for i in range(len(text)))), 100)
        assert await lines.first_line() == b'{"target": "S"}'
        got = []
        while (batch := await lines.next_batch(7)) is not None:
            got += batch
        assert got == [b'{"a": %d}' % i for i in range(300)]
        started = time.monotonic()
        big = BodyLines(_chunks(*([b"x"] * 200_000), b"\n"), 300_000)
        assert await big.next_batch() == [b"x" * 200_000]
        assert time.monotonic() - started < 5  # linear, not a scan of the buffer per chunk

    asyncio.run(run())


@pytest.mark.kafka
def test_inserts_stream_on_headwater_server_over_http1_and_http2(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory
) -> None:
    import httpx

    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"ins_{uuid.uuid4().hex[:6]}",
    )
    name = f"S_{uuid.uuid4().hex[:6].upper()}"
    created = server.ksql(
        f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic="
        f"'{name.lower()}', partitions=1, value_format='JSON');"
    )
    assert created.status_code == 200, created.text

    def body(first: int) -> Iterator[bytes]:  # a chunked request body
        yield json.dumps({"target": name}).encode() + b"\n"
        for i in range(first, first + 3):
            yield json.dumps({"ID": f"k{i}", "N": i}).encode() + b"\n"

    clients = [httpx.Client(timeout=30), httpx.Client(http1=False, http2=True, timeout=30)]
    for n, client in enumerate(clients):
        with (
            client,
            client.stream("POST", f"{server.url}/inserts-stream", content=body(3 * n)) as answer,
        ):
            assert answer.status_code == 200
            assert answer.http_version == ("HTTP/1.1", "HTTP/2")[n]
            acks = [json.loads(line) for line in answer.iter_lines() if line]
        assert acks == [{"status": "ok", "seq": i} for i in range(3)]
    pulled = server.query(f"SELECT ID, N FROM {name};")
    assert pulled.status_code == 200, pulled.text
    rows = sorted(item["row"]["columns"] for item in pulled.json() if "row" in item)
    assert rows == sorted([f"k{i}", i] for i in range(6))
