"""HTTP/2 cleartext and HTTP/1.1 on the server's one port (issue 16, item 3), through a real
``headwater server`` (``server_factory``): ksqlDB's clients send ``/query-stream`` over h2c with
prior knowledge and everything else over HTTP/1.1. Run on both servers that speak h2c (granian,
the default, and hypercorn, its fallback); uvicorn, HTTP/1.1 only, still selectable. Also the
choice of HTTP server (``HEADWATER_HTTP_SERVER``), pure."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import pytest

from headwater.http_server import (
    DEFAULT_KIND,
    HttpServerKind,
    LoopKind,
    UnknownHttpServer,
    settings_from_env,
)
from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka]

H2C_SERVERS = pytest.mark.parametrize("http_server", ["granian", "hypercorn"])


def _h2() -> httpx.Client:
    """An HTTP/2-only client: over http:// that is h2c with prior knowledge."""
    return httpx.Client(http1=False, http2=True, timeout=30)


def _stream_with_rows(server: Any, name: str) -> None:
    created = server.ksql(
        f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic="
        f"'{name}_{uuid.uuid4().hex[:6]}', partitions=1, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    for i in range(3):
        inserted = server.ksql(f"INSERT INTO {name} (ID, N) VALUES ('k{i}', {i});")
        assert inserted.status_code == 200, inserted.text


def _push(name: str, limit: str = "") -> dict[str, Any]:
    return {
        "sql": f"SELECT * FROM {name} EMIT CHANGES{limit};",
        "properties": {"auto.offset.reset": "earliest"},
    }


@H2C_SERVERS
def test_http1_and_http2_push_queries_on_one_port(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker,
    server_factory,
    monkeypatch: pytest.MonkeyPatch,
    http_server: str,
) -> None:
    monkeypatch.setenv("HEADWATER_HTTP_SERVER", http_server)  # the child process inherits it
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"h2_{uuid.uuid4().hex[:6]}",
    )
    # HTTP/1.1 clients work unchanged
    with httpx.Client(timeout=30) as h1:
        info = h1.get(f"{server.url}/info")
        assert info.http_version == "HTTP/1.1"
        assert info.json()["KsqlServerInfo"]["serverStatus"] == "RUNNING"
        listed = h1.post(f"{server.url}/ksql", json={"ksql": "LIST STREAMS;"})
        assert listed.status_code == 200 and listed.json()[0]["@type"] == "streams"
    _stream_with_rows(server, "s")

    # HTTP/2 prior knowledge on the same port: a push query streams its header line and rows
    with (
        _h2() as h2,
        h2.stream("POST", f"{server.url}/query-stream", json=_push("s", " LIMIT 2")) as streamed,
    ):
        assert streamed.http_version == "HTTP/2" and streamed.status_code == 200
        lines = [json.loads(line) for line in streamed.iter_lines() if line]
    assert lines[0]["columnNames"] == ["ID", "N"]
    assert lines[0]["queryId"].startswith("transient_")
    assert lines[1:] == [["k0", 0], ["k1", 1]]  # then the LIMIT ends the stream

    # /close-query from another (HTTP/1.1) connection ends an HTTP/2 push query
    seen: list[str] = []

    def follow() -> None:
        with (
            _h2() as h2,
            h2.stream("POST", f"{server.url}/query-stream", json=_push("s")) as streamed,
        ):
            for line in streamed.iter_lines():
                if line:
                    seen.append(line)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    deadline = time.monotonic() + 20
    while len(seen) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) == 4, seen  # the header and the three rows so far
    query_id = json.loads(seen[0])["queryId"]
    closed = httpx.post(f"{server.url}/close-query", json={"queryId": query_id}, timeout=10)
    assert closed.status_code == 200, closed.text
    follower.join(15)
    assert not follower.is_alive(), "the closed HTTP/2 push query kept streaming"

    # an HTTP/2 client that goes ends its push query (the server no longer knows its id)
    with _h2() as h2, h2.stream("POST", f"{server.url}/query-stream", json=_push("s")) as gone:
        query_id = json.loads(next(gone.iter_lines()))["queryId"]
    deadline = time.monotonic() + 15
    while True:
        answer = httpx.post(f"{server.url}/close-query", json={"queryId": query_id}, timeout=10)
        if answer.status_code == 404:
            break
        assert time.monotonic() < deadline, "the push query outlived its HTTP/2 client"
        time.sleep(0.2)
    assert server.stop() == 0, server.log()


class _H2Stream:
    """One HTTP/2 request on its own h2c connection (prior knowledge), driven frame by frame, so
    that the body can go on while the answer is read (httpx sends the whole body first)."""

    def __init__(self, port: int, path: str, content_type: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.conn.send_headers(
            1,
            [
                (":method", "POST"),
                (":path", path),
                (":scheme", "http"),
                (":authority", f"127.0.0.1:{port}"),
                ("content-type", content_type),
            ],
        )
        self.sock.sendall(self.conn.data_to_send())
        self.status = b""
        self.ended = False
        self._pending = b""

    def send(self, data: bytes, *, end: bool = False) -> None:
        self.conn.send_data(1, data, end_stream=end)
        self.sock.sendall(self.conn.data_to_send())

    def line(self) -> bytes:
        """The answer's next line (b"" once the answer has ended)."""
        while b"\n" not in self._pending and not self.ended:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection"
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    self.status = dict(event.headers)[b":status"]
                elif isinstance(event, h2.events.DataReceived):
                    self._pending += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.StreamEnded):
                    self.ended = True
            self.sock.sendall(self.conn.data_to_send())
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def close(self) -> None:
        self.sock.close()


@H2C_SERVERS
def test_inserts_stream_over_http2_acks_each_row_while_the_body_goes_on(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker,
    server_factory,
    monkeypatch: pytest.MonkeyPatch,
    http_server: str,
) -> None:
    monkeypatch.setenv("HEADWATER_HTTP_SERVER", http_server)
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"h2i_{uuid.uuid4().hex[:6]}",
    )
    created = server.ksql(
        "CREATE STREAM i (ID STRING KEY, N INT) WITH (kafka_topic="
        f"'i_{uuid.uuid4().hex[:6]}', partitions=1, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    stream = _H2Stream(server.port, "/inserts-stream", "application/vnd.ksqlapi.delimited.v1")
    try:
        stream.send(b'{"target": "I"}\n{"ID": "a", "N": 1}\n')
        assert json.loads(stream.line()) == {"status": "ok", "seq": 0}  # the body is still open
        assert stream.status == b"200"
        stream.send(b'{"ID": "b", "N": 2}\n')
        assert json.loads(stream.line()) == {"status": "ok", "seq": 1}
        stream.send(b"", end=True)
        assert stream.line() == b"" and stream.ended
    finally:
        stream.close()
    with (
        _h2() as h2c,
        h2c.stream("POST", f"{server.url}/query-stream", json=_push("i", " LIMIT 2")) as streamed,
    ):
        rows = [json.loads(line) for line in streamed.iter_lines() if line][1:]
    assert rows == [["a", 1], ["b", 2]]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@H2C_SERVERS
def test_curl_http2_prior_knowledge_and_upgrade(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker,
    server_factory,
    monkeypatch: pytest.MonkeyPatch,
    http_server: str,
) -> None:
    monkeypatch.setenv("HEADWATER_HTTP_SERVER", http_server)
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"h2c_{uuid.uuid4().hex[:6]}",
    )
    _stream_with_rows(server, "c")
    done = subprocess.run(
        [
            "curl",
            "-sS",
            "--http2-prior-knowledge",
            "-X",
            "POST",
            "-w",
            "\\n%{http_version}",
            f"{server.url}/query-stream",
            "-d",
            json.dumps(_push("c", " LIMIT 3")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    *lines, version = [line for line in done.stdout.splitlines() if line]
    assert version == "2"
    assert json.loads(lines[0])["columnNames"] == ["ID", "N"]
    assert [json.loads(line) for line in lines[1:]] == [["k0", 0], ["k1", 1], ["k2", 2]]
    # Upgrade: h2c from an HTTP/1.1 start (hypercorn upgrades, granian answers in HTTP/1.1; ksqlDB's
    # clients use prior knowledge), and plain HTTP/1.1, on the same port
    upgraded = "2" if http_server == "hypercorn" else "1.1"
    for flag, expected in (("--http2", upgraded), ("--http1.1", "1.1")):
        info = subprocess.run(
            ["curl", "-sS", flag, "-w", "\\n%{http_version}", f"{server.url}/info"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        body, version = info.stdout.strip().rsplit("\n", 1)
        assert version == expected and json.loads(body)["KsqlServerInfo"]


def test_uvicorn_stays_selectable(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEADWATER_HTTP_SERVER", "uvicorn")  # the child process inherits it
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"uv_{uuid.uuid4().hex[:6]}",
    )
    info = httpx.get(f"{server.url}/info", timeout=10)
    assert info.http_version == "HTTP/1.1" and info.status_code == 200
    with pytest.raises(httpx.HTTPError), _h2() as h2:  # uvicorn speaks no HTTP/2
        h2.get(f"{server.url}/info")
    assert server.stop() == 0, server.log()
    assert "server stopped" in server.log()


def test_settings_from_env() -> None:
    default = settings_from_env({}, host="0.0.0.0", port=8088)
    assert (default.kind, default.loop, default.host, default.port) == (
        DEFAULT_KIND,
        LoopKind.AUTO,
        "0.0.0.0",
        8088,
    )
    assert DEFAULT_KIND is HttpServerKind.GRANIAN
    chosen = settings_from_env(
        {
            "HEADWATER_HTTP_SERVER": " Uvicorn ",
            "HEADWATER_HTTP_LOOP": "asyncio",
            "HEADWATER_UVICORN_HTTP": "h11",
        },
        host="h",
        port=1,
    )
    assert (chosen.kind, chosen.loop, chosen.uvicorn_http) == (
        HttpServerKind.UVICORN,
        LoopKind.ASYNCIO,
        "h11",
    )
    with pytest.raises(UnknownHttpServer, match="HEADWATER_HTTP_SERVER='tornado'"):
        settings_from_env({"HEADWATER_HTTP_SERVER": "tornado"}, host="h", port=1)


def test_a_client_that_never_finishes_its_headers_is_dropped() -> None:
    """Half-open requests must not pile up (issue 21, connection hygiene): granian closes a
    connection whose headers do not arrive within header_read_timeout_s."""
    import socket
    import threading

    from starlette.applications import Starlette

    from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
    from headwater.kafka._ports import free_port

    server = HttpServer(
        Starlette(),
        HttpServerSettings(
            port=free_port(),
            kind=HttpServerKind.GRANIAN,
            header_read_timeout_s=0.5,
            graceful_timeout_s=1.0,
        ),
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.started.wait(10)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /query HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            began = time.monotonic()
            try:
                while sock.recv(1024):
                    pass
            except ConnectionResetError:
                pass
            assert time.monotonic() - began < 3.0  # closed by the server, not by our timeout
    finally:
        server.stop()
        thread.join(10)


@H2C_SERVERS
def test_an_unread_http2_push_stream_stops_alone_and_resumes(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker,
    server_factory,
    monkeypatch: pytest.MonkeyPatch,
    http_server: str,
) -> None:
    """Five push queries on one HTTP/2 connection (issue 28, finding 4): the one whose client
    grants no window (does not read) stops at the flow-control window (65,535 bytes), the other
    four go on to their end, and it goes on to its end once its client reads."""
    from confluent_kafka import Producer

    monkeypatch.setenv("HEADWATER_HTTP_SERVER", http_server)
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"h2w_{uuid.uuid4().hex[:6]}",
    )
    topic = f"w_{uuid.uuid4().hex[:6]}"
    created = server.ksql(
        f"CREATE STREAM w (ID STRING KEY, S STRING, N INT) WITH (kafka_topic="
        f"'{topic}', partitions=1, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    rows, streams, unread = 500, (1, 3, 5, 7, 9), 1
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.increment_flow_control_window(2**24)  # the connection's window is never the limit
    body = json.dumps({"sql": f"SELECT * FROM w EMIT CHANGES LIMIT {rows};"}).encode()
    for stream_id in streams:
        conn.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":path", "/query-stream"),
                (":scheme", "http"),
                (":authority", server.host),
                ("content-type", "application/json"),
            ],
        )
        conn.send_data(stream_id, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    got = dict.fromkeys(streams, b"")
    answered: set[int] = set()
    ended: set[int] = set()
    held = [0]  # bytes of the unread stream not yet granted back

    def pump(until: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not until() and time.monotonic() < deadline:
            data = sock.recv(1 << 20)
            assert data, "the server closed the connection"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    answered.add(event.stream_id)
                elif isinstance(event, h2.events.DataReceived):
                    got[event.stream_id] += event.data
                    if event.stream_id == unread and held[0] >= 0:
                        held[0] += event.flow_controlled_length  # granted on the connection only
                        conn.increment_flow_control_window(event.flow_controlled_length)
                    else:
                        conn.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                elif isinstance(event, h2.events.StreamEnded):
                    ended.add(event.stream_id)
            sock.sendall(conn.data_to_send())

    try:
        pump(lambda: len(answered) == len(streams), 20)
        pump(lambda: all(b"\n" in got[s] for s in streams), 20)  # every header line came
        producer = Producer({"bootstrap.servers": memory_broker.bootstrap_servers})
        for n in range(rows):
            producer.produce(topic, json.dumps({"S": "x" * 1000, "N": n}).encode(), b"k")
        producer.flush(30)
        others = set(streams) - {unread}
        pump(lambda: others <= ended, 60)
        assert others <= ended, {s: len(got[s]) for s in streams}
        assert all(got[s].count(b"\n") == rows + 1 for s in others)
        # its rows may still be on their way (its own consumer, its own pace): until its window is full
        pump(lambda: len(got[unread]) >= 65535, 30)
        time.sleep(0.5)  # anything beyond the window would arrive now
        sock.settimeout(0.5)
        try:
            pump(lambda: False, 1)
        except TimeoutError:
            pass
        sock.settimeout(20)
        assert len(got[unread]) == 65535 and unread not in ended  # its window, and no more
        conn.acknowledge_received_data(held[0], unread)  # now its client reads
        held[0] = -1
        sock.sendall(conn.data_to_send())
        pump(lambda: unread in ended, 30)
        assert got[unread].split(b"\n", 1)[1] == got[3].split(b"\n", 1)[1]  # the same rows
    finally:
        sock.close()
