"""DROP ... DELETE TOPIC while servers read the topic: no server dies (issue 28, finding 1).

On the embedded broker a consumer fetching a topic that is deleted kills its process. Here two servers
of one service read the dropped topics in every way a server does: the table's restorer (active on
one server, standby on the other), a push query and a PRINT on the server that did not take the DROP.
Both servers must live on; the push query and PRINT end with an error item; names can be reused.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _stream_lines(url: str, body: dict[str, Any], lines: list[str], done: threading.Event) -> None:
    try:
        with httpx.stream("POST", url, json=body, timeout=httpx.Timeout(60, read=60)) as answer:
            for line in answer.iter_lines():
                if line.strip():
                    lines.append(line)
    except httpx.HTTPError as exc:
        lines.append(f"client error: {exc!r}")
    finally:
        done.set()


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.1)


def _rows(server: Any, sql: str) -> list[Any]:
    answer = server.query(sql)
    if answer.status_code != 200:
        return []
    return [item["row"]["columns"] for item in answer.json() if "row" in item]


def test_drop_delete_topic_while_two_servers_read_it(
    memory_broker: EmbeddedBroker,
    server_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    service = f"drop-{uuid.uuid4().hex[:8]}"
    common = ["-b", memory_broker.bootstrap_servers, "--service-id", service]
    first = server_factory(*common, "--state-dir", str(tmp_path / "a"))
    second = server_factory(*common, "--state-dir", str(tmp_path / "b"))
    stream_topic, table_topic = f"{service}-s", f"{service}-t"
    for sql in (
        (
            f"CREATE STREAM s (id INT KEY, v INT) WITH (kafka_topic='{stream_topic}', partitions=2, "
            "value_format='JSON');"
        ),
        (
            f"CREATE TABLE t (id INT PRIMARY KEY, v INT) WITH (kafka_topic='{table_topic}', "
            "partitions=2, value_format='JSON');"
        ),
        "INSERT INTO t (id, v) VALUES (1, 10);",
        "INSERT INTO s (id, v) VALUES (1, 10);",
    ):
        assert first.ksql(sql).status_code == 200, first.ksql(sql).text
    for server in (first, second):
        _wait(lambda s=server: _rows(s, "SELECT * FROM t;"), 60, "the table is not restored")

    readers: list[tuple[list[str], threading.Event]] = []
    bodies = (
        {"sql": "SELECT * FROM s EMIT CHANGES;"},
        {"ksql": f"PRINT '{table_topic}' FROM BEGINNING;"},
    )
    for body in bodies:
        lines: list[str] = []
        done = threading.Event()
        path = "/query-stream" if "sql" in body else "/query"
        threading.Thread(
            target=_stream_lines, args=(second.url + path, body, lines, done), daemon=True
        ).start()
        readers.append((lines, done))
    _wait(lambda: all(lines for lines, _done in readers), 30, "push query or PRINT did not start")
    time.sleep(0.5)  # both are fetching now

    for sql in ("DROP TABLE t DELETE TOPIC;", "DROP STREAM s DELETE TOPIC;"):
        answer = first.ksql(sql)
        assert answer.status_code == 200, answer.text
        assert answer.json()[0]["warnings"] == [], answer.text

    for lines, done in readers:
        assert done.wait(30), f"a reader of a deleted topic did not end: {lines}"
        assert "deleted" in lines[-1], lines
    time.sleep(2)  # a crash would follow the deletion within a fetch or two
    for server in (first, second):
        assert server.process.poll() is None, f"a server died:\n{server.log()}"
        assert httpx.get(f"{server.url}/info", timeout=10).status_code == 200
    topics = admin_client(memory_broker.settings()).list_topics(timeout=10).topics
    assert stream_topic not in topics and table_topic not in topics

    # The names and topics can be used again at once (the retirement does not hold them back).
    for sql in (
        (
            f"CREATE TABLE t (id INT PRIMARY KEY, v INT) WITH (kafka_topic='{table_topic}', "
            "partitions=2, value_format='JSON');"
        ),
        "INSERT INTO t (id, v) VALUES (2, 20);",
    ):
        assert first.ksql(sql).status_code == 200, first.ksql(sql).text
    for server in (first, second):
        _wait(
            lambda s=server: _rows(s, "SELECT * FROM t;") == [[2, 20]],
            60,
            lambda s=server: (
                f"the re-created table is not restored: {_rows(s, 'SELECT * FROM t;')}"
            ),
        )
