"""Push queries that need no state, through a real server: rows arrive live over /query and
/query-stream, LIMIT ends them with ksqlDB's final message, /close-query ends one from another
connection, and a client that goes ends its query."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client

pytestmark = [pytest.mark.kafka]


def _insert_later(url: str, statements: list[str], delay_s: float = 1.0) -> threading.Thread:
    def run() -> None:
        time.sleep(delay_s)
        for text in statements:
            httpx.post(f"{url}/ksql", json={"ksql": text}, timeout=30).raise_for_status()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_push_queries_stream_live_rows(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"push_{suffix}",
    )
    created = server.ksql(
        f"CREATE STREAM clicks (ID STRING KEY, N INT) WITH (kafka_topic="
        f"'clicks_{suffix}', partitions=2, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    assert server.ksql("INSERT INTO clicks (ID, N) VALUES ('old', 0);").status_code == 200

    # /query: from the end (latest), a filter and projection, two rows then "Limit Reached"
    inserts = _insert_later(
        server.url, [f"INSERT INTO clicks (ID, N) VALUES ('k{i}', {i});" for i in range(1, 5)]
    )
    started = time.monotonic()
    answer = httpx.post(
        f"{server.url}/query",
        timeout=60,
        json={"ksql": "SELECT ID, N * 10 AS TEN FROM clicks WHERE N > 1 EMIT CHANGES LIMIT 2;"},
    )
    inserts.join()
    assert answer.status_code == 200, answer.text
    items = json.loads(answer.text)
    assert items[0]["header"]["schema"] == "`ID` STRING, `TEN` INTEGER"  # ksqlDB marks no KEY here
    assert items[0]["header"]["queryId"].startswith("transient_")
    assert sorted(i["row"]["columns"] for i in items[1:3]) == [["k2", 20], ["k3", 30]]
    assert items[3] == {"finalMessage": "Limit Reached"}
    assert time.monotonic() - started < 30

    # /query-stream from the beginning: the header line, then one array per row
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=60,
        json={
            "sql": "SELECT * FROM clicks EMIT CHANGES LIMIT 3;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        lines = [json.loads(line) for line in streamed.iter_lines() if line]
    assert lines[0]["columnNames"] == ["ID", "N"]
    assert len(lines) == 4 and all(isinstance(row, list) for row in lines[1:])

    # /close-query ends a query started on another connection
    seen: list[str] = []

    def follow() -> None:
        with httpx.stream(
            "POST",
            f"{server.url}/query-stream",
            timeout=60,
            json={"sql": "SELECT * FROM clicks EMIT CHANGES;"},
        ) as streamed:
            for line in streamed.iter_lines():
                if line:
                    seen.append(line)

    follower = threading.Thread(target=follow)
    follower.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    query_id = json.loads(seen[0])["queryId"]
    # SHOW QUERIES lists it while it runs, as ksqlDB does (queryType PUSH)
    assert _push_queries(server.url) == [
        (query_id, "RUNNING", "SELECT * FROM clicks EMIT CHANGES;")
    ]
    closed = httpx.post(f"{server.url}/close-query", json={"queryId": query_id}, timeout=10)
    assert closed.status_code == 200
    follower.join(10)
    assert not follower.is_alive(), "the closed push query kept streaming"
    assert _push_queries(server.url) == []
    unknown = httpx.post(f"{server.url}/close-query", json={"queryId": "nope"}, timeout=10)
    assert unknown.status_code == 404

    # what needs state runs as a transient Spark query, cleaned up when the client goes
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=180,
        json={
            "sql": "SELECT ID, COUNT(*) AS n FROM clicks GROUP BY ID EMIT CHANGES LIMIT 3;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        lines = [json.loads(line) for line in streamed.iter_lines() if line]
    assert lines[0].get("columnNames") == ["ID", "N"], lines
    assert len(lines) == 4 and all(row[1] == 1 for row in lines[1:]), lines
    # from now on (latest): a record written while Spark starts the query is counted; SHOW
    # QUERIES says the push query is PENDING until its Spark query's first micro-batch
    inserts = _insert_later(server.url, ["INSERT INTO clicks (ID, N) VALUES ('late', 9);"], 0.5)
    states: list[str] = []
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=180,
        json={"sql": "SELECT ID, COUNT(*) AS n FROM clicks GROUP BY ID EMIT CHANGES LIMIT 1;"},
    ) as streamed:
        states = [state for _, state, _ in _push_queries(server.url)]
        late = [json.loads(line) for line in streamed.iter_lines() if line]
    inserts.join()
    assert late[1:] == [["late", 1]], late
    assert states in (["PENDING"], ["RUNNING"]), states
    # the grouping key need not be selected; the rows are the projection as written
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=180,
        json={
            "sql": "SELECT COUNT(*) AS n FROM clicks GROUP BY ID EMIT CHANGES LIMIT 1;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        counted = [json.loads(line) for line in streamed.iter_lines() if line]
    assert counted[0].get("columnNames") == ["N"] and counted[1] == [1], counted
    # an aggregate without GROUP BY: one group, the whole stream
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=180,
        json={
            "sql": "SELECT COUNT(*) AS total FROM clicks EMIT CHANGES LIMIT 1;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        whole = [json.loads(line) for line in streamed.iter_lines() if line]
    assert whole[0].get("columnNames") == ["TOTAL"] and whole[1][0] >= 1, whole
    deadline = time.monotonic() + 60
    topics: set[str] = {"?"}
    while time.monotonic() < deadline:  # its hidden topic is deleted once its query stopped
        listed = admin_client(memory_broker.settings()).list_topics(timeout=10).topics
        topics = {t for t in listed if t.startswith("_headwater-transient-")}
        if not topics:
            break
        time.sleep(0.5)
    assert not topics, topics


def test_push_query_planning_refuses_state_and_allows_offsets() -> None:
    from headwater.engine.errors import PullQueryError
    from headwater.engine.push import plan_push
    from headwater.metastore.catalog import Column, Source, SourceKind
    from headwater.sqlparse_ext import parse_one

    source = Source(
        SourceKind.STREAM, "S", (Column("K", "STRING", key=True), Column("V", "INT")), "s", 1
    )
    plan = plan_push(
        parse_one("SELECT ROWPARTITION, ROWOFFSET, K FROM S EMIT CHANGES LIMIT 1;"), source, {}
    )
    assert [c.name for c in plan.schema] == ["ROWPARTITION", "ROWOFFSET", "K"]
    with pytest.raises(PullQueryError, match="aggregate functions need state"):
        plan_push(parse_one("SELECT COUNT(*) FROM S EMIT CHANGES;"), source, {})


def test_table_push_queries_show_tombstones(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    suffix = uuid.uuid4().hex[:6]
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"pusht_{suffix}",
    )
    topic = f"users_{suffix}"
    created = server.ksql(
        f"CREATE TABLE users (K INT PRIMARY KEY, ID INT) WITH (kafka_topic="
        f"'{topic}', partitions=1, key_format='JSON', value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    producer = Producer({"bootstrap.servers": memory_broker.bootstrap_servers})
    for key, value in (
        (b"10", b'{"ID": 110}'),
        (b"10", None),
        (None, b'{"ID": 123}'),
        (b"11", b'{"ID": 111}'),
    ):
        producer.produce(topic, value, key)
    producer.flush(10)
    answer = httpx.post(
        f"{server.url}/query",
        timeout=60,
        json={
            "ksql": "SELECT * FROM users EMIT CHANGES LIMIT 3;",
            "streamsProperties": {"auto.offset.reset": "earliest"},
        },
    )
    items = json.loads(answer.text)
    assert items[1:] == [
        {"row": {"columns": [10, 110]}},
        {"row": {"columns": [10, None], "tombstone": True}},
        {"row": {"columns": [11, 111]}},
        {"finalMessage": "Limit Reached"},
    ]


def _readers_after_header(
    url: str, sql: str, count: int, timeout_s: float = 15.0
) -> tuple[list[threading.Thread], threading.Barrier, list[object]]:
    """``count`` readers of ``sql`` (LIMIT 1) over /query-stream; each passes the barrier once its
    header came back (the test's thread too: then it writes), and appends its one row, or the
    error that ended it, to the list."""
    headers = threading.Barrier(count + 1, timeout=timeout_s * 2)
    got: list[object] = []

    def read() -> None:
        try:
            with httpx.stream(
                "POST", f"{url}/query-stream", timeout=timeout_s, json={"sql": sql}
            ) as streamed:
                lines = (line for line in streamed.iter_lines() if line)
                header = json.loads(next(lines))
                assert "queryId" in header, header
                headers.wait()
                got.append(json.loads(next(lines)))
        except Exception as exc:  # noqa: BLE001 - reported by the test
            got.append(repr(exc))
            headers.abort()

    threads = [threading.Thread(target=read) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, headers, got


def test_push_queries_start_at_the_end_when_their_header_comes(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    """auto.offset.reset=latest (the default): the record written after a reader has its header is
    that reader's first row, on an empty topic and behind 2,000 older records written in batches
    (where the embedded broker's ListOffsets 'latest' answers an offset inside the last batch)."""
    from confluent_kafka import Producer

    suffix = uuid.uuid4().hex[:6]
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"pushend_{suffix}",
    )
    topic = f"ends_{suffix}"
    created = server.ksql(
        f"CREATE STREAM ends (ID STRING KEY, N INT) WITH (kafka_topic="
        f"'{topic}', partitions=2, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    producer = Producer({"bootstrap.servers": memory_broker.bootstrap_servers, "linger.ms": 20})
    readers = 10
    for phase, older in enumerate((0, 2000)):
        for i in range(older):
            producer.produce(topic, json.dumps({"N": i}).encode(), f"old{i}".encode())
        producer.flush(30)
        threads, headers, got = _readers_after_header(
            server.url, "SELECT ID, N FROM ends EMIT CHANGES LIMIT 1;", readers
        )
        headers.wait()  # every reader has its header: now the record
        producer.produce(topic, json.dumps({"N": -1}).encode(), f"new{phase}".encode())
        producer.flush(10)
        for thread in threads:
            thread.join(40)
        assert got == [[f"new{phase}", -1]] * readers, (older, got)


def _push_queries(url: str) -> list[tuple[str, str, str]]:
    """(id, state, statement) of the push queries SHOW QUERIES lists."""
    answer = httpx.post(f"{url}/ksql", json={"ksql": "SHOW QUERIES;"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return [
        (q["id"], q["state"], q["queryString"])
        for q in answer.json()[0]["queries"]
        if q["queryType"] == "PUSH"
    ]
