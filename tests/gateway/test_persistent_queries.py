"""Persistent queries end to end, as a user runs them: `headwater server` processes with Spark inside,
statements over the REST API, records read back from the sink topic. Real broker, real Spark.

Each server starts its Spark child process with its first query (~10-20 s on 2 cores), so these
tests are few and each checks a whole story.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from bench._processes import comm, process_tree
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer, producer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _read_topic(
    broker: EmbeddedBroker, topic: str, partitions: int, want: int, timeout_s: float = 120.0
) -> list[tuple[bytes | None, dict, dict]]:
    reader = consumer(broker.settings(), f"check-{uuid.uuid4().hex[:6]}")
    got: list[tuple[bytes | None, dict, dict]] = []
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            for message in reader.consume(500, 0.5):
                if message.error() is None:
                    got.append(
                        (
                            message.key(),
                            json.loads(message.value() or b"null"),
                            dict(message.headers() or ()),
                        )
                    )
        # a little longer: records beyond `want` would be duplicates
        end = time.monotonic() + 2
        while time.monotonic() < end:
            for message in reader.consume(500, 0.5):
                if message.error() is None:
                    got.append(
                        (
                            message.key(),
                            json.loads(message.value() or b"null"),
                            dict(message.headers() or ()),
                        )
                    )
    finally:
        reader.close()
    return got


def _forked_runners(root: int) -> list[int]:
    """The source runners under ``root`` that `runner_forks`' server forked: it names each by its
    module (an unforked runner keeps the interpreter's name)."""
    return [pid for pid in process_tree(root) if comm(pid) == "python_streamin"]


def _ok(response: object) -> list[dict]:
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    return response.json()  # type: ignore[attr-defined, no-any-return]


def test_csas_lifecycle_through_the_rest_api(
    memory_broker: EmbeddedBroker,
    server_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    orders, big = f"ORDERS_{suffix}", f"BIG_{suffix}"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"pq_{suffix}",
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {orders} (id STRING KEY, item STRING, qty INT) WITH "
            f"(kafka_topic='{orders}', partitions=2, value_format='JSON');"
        )
    )
    created = _ok(
        server.ksql(
            f"CREATE STREAM {big} AS SELECT id, UCASE(item) AS item, "
            f"qty * 2 AS dbl FROM {orders} WHERE qty > 10 EMIT CHANGES;"
        )
    )
    message = created[0]["commandStatus"]["message"]
    assert message.startswith(f"Stream created with query ID: CSAS_{big}_")
    query_id = message.rsplit(" ", 1)[-1]

    for key, item, qty in [("a", "pen", 11), ("b", "ink", 3), ("c", "cap", 12)]:
        _ok(server.ksql(f"INSERT INTO {orders} (id, item, qty) VALUES ('{key}', '{item}', {qty});"))
    bad = producer(memory_broker.settings(), "test")
    bad.produce(orders, b"this is not JSON", b"z")
    bad.flush(10)

    records = _read_topic(memory_broker, big, 2, want=2)
    assert sorted((k, v) for k, v, _ in records) == [
        (b"a", {"ITEM": "PEN", "DBL": 22}),
        (b"c", {"ITEM": "CAP", "DBL": 24}),
    ]
    assert all(h["hw.query"] == query_id.encode() for _, _, h in records)

    shown = _ok(server.ksql("SHOW QUERIES;"))[0]
    assert shown["@type"] == "queries"
    assert [(q["id"], q["state"], q["sinks"]) for q in shown["queries"]] == [
        (query_id, "RUNNING", [big])
    ]

    deadline = time.monotonic() + 30
    while True:  # the sink reports the skipped record within a batch or two
        described = _ok(server.ksql(f"DESCRIBE {big} EXTENDED;"))[0]["sourceDescription"]
        if "processing-errors: 1" in described["errorStats"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert described["extended"] is True
    assert described["writeQueries"][0]["id"] == query_id
    assert "processing-errors: 1" in described["errorStats"]
    assert "Failed to deserialize value" in described["errorStats"]
    assert "messages-written: 2" in described["statistics"]

    explained = _ok(server.ksql(f"EXPLAIN {query_id};"))[0]
    assert explained["@type"] == "queryDescription"
    plan = explained["queryDescription"]["executionPlan"]
    assert "[ FILTER ] | Condition: (QTY > 10)" in plan
    assert [f["name"] for f in explained["queryDescription"]["fields"]] == ["ID", "ITEM", "DBL"]

    pulled = server.query(f"SELECT * FROM {big};")
    assert pulled.status_code == 200, pulled.text
    rows = sorted(item["row"]["columns"] for item in pulled.json() if "row" in item)
    assert rows == [["a", "PEN", 22], ["c", "CAP", 24]]

    # the query's source runner (Spark's planner of its offsets) was forked from the warm fork
    # server of `runner_forks`, not started afresh (~10 MB of its own instead of ~63 MB)
    runners = _forked_runners(server.process.pid)
    assert len(runners) == 1, runners

    refused = server.ksql(f"DROP STREAM {orders};")
    assert refused.status_code == 400  # as ksqlDB: BIG, made from it, must be dropped first
    assert f"streams and/or tables read from this source: [{big}]" in refused.json()["message"]
    unsupported = server.ksql(
        f"CREATE STREAM agg_{suffix} AS SELECT id, COUNT(*) AS n FROM {orders} GROUP BY id;"
    )
    assert unsupported.status_code == 400
    assert "Your SELECT query produces a TABLE" in unsupported.json()["message"]

    checkpoint = tmp_path / "node" / "checkpoints" / query_id
    assert checkpoint.is_dir()
    # idle since its records, its source held Spark's question for new ones: expected, so Spark
    # does not log that each such trigger "is falling behind" (twice a second per idle query)
    spark_log = (tmp_path / "node" / "logs" / "spark.log").read_text(errors="replace")
    assert "falling behind" not in spark_log
    _ok(server.ksql(f"TERMINATE {query_id};"))
    assert _ok(server.ksql("SHOW QUERIES;"))[0]["queries"] == []
    deadline = time.monotonic() + 20
    while checkpoint.exists() and time.monotonic() < deadline:  # deleted once the query stopped
        time.sleep(0.2)
    assert not checkpoint.exists()
    _ok(server.ksql(f"DROP STREAM {big} DELETE TOPIC;"))
    _ok(server.ksql(f"DROP STREAM {orders};"))
    assert server.stop() == 0


def test_kill_9_while_records_flow_then_restart_writes_each_record_once(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    source, sink = f"IN_{suffix}", f"OUT_{suffix}"
    args = (
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"eos_{suffix}",
    )
    server = server_factory(*args)
    _ok(
        server.ksql(
            f"CREATE STREAM {source} (id STRING KEY, n INT) WITH (kafka_topic='{source}', "
            "partitions=2, value_format='JSON');"
        )
    )
    _ok(server.ksql(f"CREATE STREAM {sink} AS SELECT id, n + 1 AS m FROM {source};"))

    total = 600
    writer = producer(memory_broker.settings(), "flow")
    stop = threading.Event()

    def flow() -> None:
        for i in range(total):
            writer.produce(source, json.dumps({"N": i}).encode(), str(i).encode())
            writer.poll(0)
            if stop.wait(0.02):
                break
        writer.flush(10)

    feeder = threading.Thread(target=flow)
    feeder.start()
    try:
        _read_topic(memory_broker, sink, 2, want=60, timeout_s=120)  # the query is writing
        server.kill()  # kill -9 of the server (its Spark child follows it)
        time.sleep(2)
        restarted = server_factory(*args)
        feeder.join(60)
        records = _read_topic(memory_broker, sink, 2, want=total, timeout_s=180)
    finally:
        stop.set()
        feeder.join(30)
    values = [v["M"] for _, v, _ in records]
    assert len(values) == total, f"{len(values)} records for {total} inputs"
    assert sorted(values) == list(range(1, total + 1))
    assert restarted.stop() == 0


def test_ctas_aggregate_is_materialized_and_answers_pull_queries(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    rides, current = f"RIDES_{suffix}", f"CURRENT_{suffix}"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"agg_{suffix}",
        "--set",
        "ksql.streams.cache.max.bytes.buffering=0",
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {rides} (profileId VARCHAR, latitude DOUBLE, km INT) WITH "
            f"(kafka_topic='{rides}', partitions=2, value_format='JSON');"
        )
    )
    created = _ok(
        server.ksql(
            f"CREATE TABLE {current} AS SELECT profileId, LATEST_BY_OFFSET(latitude) AS la, "
            f"COUNT(*) AS n, SUM(km) AS km FROM {rides} GROUP BY profileId EMIT CHANGES;"
        )
    )
    message = created[0]["commandStatus"]["message"]
    assert message.startswith(f"Table created with query ID: CTAS_{current}_"), message
    inputs = [("c2", 37.7, 1), ("4ab", 37.4, 2), ("c2", 37.8, 3), ("18f", 37.5, 4), ("c2", 37.9, 5)]
    for profile, latitude, km in inputs:
        _ok(
            server.ksql(
                f"INSERT INTO {rides} (profileId, latitude, km) VALUES ('{profile}', "
                f"{latitude}, {km});"
            )
        )

    records = _read_topic(memory_broker, current, 2, want=len(inputs))
    assert len(records) == len(inputs)  # one update per input record (buffering off)
    final = {k: v for k, v, _ in records}
    assert final[b"c2"] == {"LA": 37.9, "N": 3, "KM": 9}

    deadline = time.monotonic() + 30
    while True:  # the table is materialized from its changelog (the sink topic)
        pulled = server.query(f"SELECT * FROM {current} WHERE profileId = 'c2';")
        rows = (
            [i["row"]["columns"] for i in pulled.json() if "row" in i]
            if pulled.status_code == 200
            else []
        )
        if rows == [["c2", 37.9, 3, 9]] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert rows == [["c2", 37.9, 3, 9]], pulled.text
    _ok(server.ksql(f"INSERT INTO {rides} (profileId, latitude, km) VALUES ('c2', 38.0, 10);"))
    deadline = time.monotonic() + 30
    while True:
        pulled = server.query(f"SELECT n, la FROM {current} WHERE profileId = 'c2';")
        rows = [i["row"]["columns"] for i in pulled.json() if "row" in i]
        if rows == [[4, 38.0]] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert rows == [[4, 38.0]]
    explained = _ok(server.ksql(f"EXPLAIN {message.rsplit(' ', 1)[-1]};"))
    assert "[ AGGREGATE ]" in explained[0]["queryDescription"]["executionPlan"]

    # A windowed count per minute, queried by key and window (the stream's records carry their
    # own event times: ROWTIME)
    per_minute = f"PER_MINUTE_{suffix}"
    _ok(
        server.ksql(
            f"CREATE TABLE {per_minute} AS SELECT profileId, COUNT(*) AS n FROM {rides} "
            "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY profileId;"
        )
    )
    minute = int(time.time() * 1000) // 60_000 * 60_000  # event times near the stream's own
    for ts in (minute + 1_000, minute + 2_000, minute + 65_000):
        _ok(
            server.ksql(
                f"INSERT INTO {rides} (ROWTIME, profileId, latitude, km) VALUES ({ts}, "
                "'w1', 1.0, 1);"
            )
        )
    wanted = [["w1", minute, minute + 60_000, 2], ["w1", minute + 60_000, minute + 120_000, 1]]
    deadline = time.monotonic() + 60
    while True:
        pulled = server.query(f"SELECT * FROM {per_minute} WHERE profileId = 'w1';")
        rows = (
            [i["row"]["columns"] for i in pulled.json() if "row" in i]
            if pulled.status_code == 200
            else []
        )
        if rows == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert rows == wanted, pulled.text
    header = next(i["header"] for i in pulled.json() if "header" in i)
    assert "`WINDOWSTART` BIGINT KEY" in header["schema"]
    pulled = server.query(
        f"SELECT n FROM {per_minute} WHERE profileId = 'w1' AND "
        f"WINDOWSTART >= {minute + 30_000} AND WINDOWSTART < {minute + 90_000};"
    )
    assert [i["row"]["columns"] for i in pulled.json() if "row" in i] == [[1]], pulled.text
    assert server.stop() == 0


def test_joins_run_on_spark_stream_table_and_table_table(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    clicks, users, items = f"CLICKS_{suffix}", f"USERS_{suffix}", f"ITEMS_{suffix}"
    enriched, both = f"ENRICHED_{suffix}", f"BOTH_{suffix}"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"join_{suffix}",
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {clicks} (user_id VARCHAR KEY, page VARCHAR) WITH "
            f"(kafka_topic='{clicks}', partitions=2, value_format='JSON');"
        )
    )
    _ok(
        server.ksql(
            f"CREATE TABLE {users} (id VARCHAR PRIMARY KEY, name VARCHAR) WITH "
            f"(kafka_topic='{users}', partitions=2, value_format='JSON');"
        )
    )
    _ok(
        server.ksql(
            f"CREATE TABLE {items} (id VARCHAR PRIMARY KEY, label VARCHAR) WITH "
            f"(kafka_topic='{items}', partitions=2, value_format='JSON');"
        )
    )
    for key, name in (("u1", "ann"), ("u2", "bob")):
        _ok(server.ksql(f"INSERT INTO {users} (id, name) VALUES ('{key}', '{name}');"))
    _ok(
        server.ksql(
            f"CREATE STREAM {enriched} AS SELECT c.user_id, page, name FROM {clicks} c "
            f"LEFT JOIN {users} u ON c.user_id = u.id;"
        )
    )
    _ok(
        server.ksql(
            f"CREATE TABLE {both} AS SELECT u.id, name, label FROM {users} u "
            f"JOIN {items} i ON u.id = i.id;"
        )
    )
    per_name = f"PER_NAME_{suffix}"  # an aggregation over a join: two stateful stages
    _ok(
        server.ksql(
            f"CREATE TABLE {per_name} AS SELECT name, COUNT(*) AS n FROM {clicks} c "
            f"JOIN {users} u ON c.user_id = u.id GROUP BY name;"
        )
    )
    time.sleep(1)  # the table's rows are read before the clicks (they are older)
    for key, page in (("u1", "/a"), ("u2", "/b"), ("u3", "/c")):
        _ok(server.ksql(f"INSERT INTO {clicks} (user_id, page) VALUES ('{key}', '{page}');"))
    _ok(server.ksql(f"INSERT INTO {items} (id, label) VALUES ('u2', 'pen');"))

    records = _read_topic(memory_broker, enriched, 2, want=3)
    assert sorted((k, v["PAGE"], v["NAME"]) for k, v, _ in records) == [
        (b"u1", "/a", "ann"),
        (b"u2", "/b", "bob"),
        (b"u3", "/c", None),
    ]
    counted = _read_topic(memory_broker, per_name, 2, want=2)
    assert sorted((k, v["N"]) for k, v, _ in counted)[-2:] == [(b"ann", 1), (b"bob", 1)]
    joined = _read_topic(memory_broker, both, 2, want=1)
    assert [(k, v) for k, v, _ in joined] == [(b"u2", {"NAME": "bob", "LABEL": "pen"})]
    deadline = time.monotonic() + 30
    while True:  # the table-table join's result is a table: materialized and queryable
        pulled = server.query(f"SELECT * FROM {both} WHERE u_id = 'u2';")
        rows = (
            [i["row"]["columns"] for i in pulled.json() if "row" in i]
            if pulled.status_code == 200
            else []
        )
        if rows == [["u2", "bob", "pen"]] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert rows == [["u2", "bob", "pen"]], pulled.text


def _spark_child(server_pid: int) -> int | None:
    """The server's Spark engine child (a multiprocessing spawn child), by /proc."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == server_pid and b"spawn_main" in cmdline:
            return int(entry.name)
    return None


def test_a_killed_spark_engine_is_started_again_and_its_queries_resume(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    source, sink = f"IN_{suffix}", f"OUT_{suffix}"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"respawn_{suffix}",
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {source} (id STRING KEY, v INT) WITH (kafka_topic='{source}', "
            "partitions=1, value_format='JSON');"
        )
    )
    _ok(server.ksql(f"CREATE STREAM {sink} AS SELECT id, v * 2 AS w FROM {source};"))
    _ok(server.ksql(f"INSERT INTO {source} (id, v) VALUES ('a', 1);"))
    assert len(_read_topic(memory_broker, sink, 1, want=1)) == 1
    assert server.process is not None
    child = _spark_child(server.process.pid)
    assert child is not None, "no Spark engine child found"
    os.killpg(child, 9)  # the child and its JVM and workers (its own process group)
    _ok(server.ksql(f"INSERT INTO {source} (id, v) VALUES ('b', 2);"))
    records = _read_topic(memory_broker, sink, 1, want=2, timeout_s=180)
    assert [(k, v) for k, v, _ in records] == [(b"a", {"W": 2}), (b"b", {"W": 4})]
    assert "died" in server.log()


@pytest.mark.timeout(600)  # two cold Spark starts (the restart), on a loaded 2-core machine
def test_auto_offset_reset_decides_where_a_query_starts_and_a_restart_resumes(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    """ksqlDB's auto.offset.reset (issue 28, finding 5): a CTAS over a stream created after two
    records does not count them by default (latest), counts them with SET 'auto.offset.reset' =
    'earliest' (the request's streamsProperties) or with the server's setting; after a restart
    each query resumes from its checkpoint (no record read twice, none skipped)."""
    suffix = uuid.uuid4().hex[:6].upper()
    source, latest, earliest, configured = (f"{n}_{suffix}" for n in ("S", "L", "E", "C"))
    args = (
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"reset_{suffix}",
        "--set",
        "ksql.streams.cache.max.bytes.buffering=0",
    )
    server = server_factory(*args)
    _ok(
        server.ksql(
            f"CREATE STREAM {source} (id STRING KEY, v INT) WITH (kafka_topic='{source}', "
            "partitions=1, value_format='JSON');"
        )
    )
    insert = f"INSERT INTO {source} (id, v) VALUES ('k', 1);"
    for _ in range(2):
        _ok(server.ksql(insert))
    count = "AS SELECT id, COUNT(*) AS n FROM {} GROUP BY id;"
    _ok(server.ksql(f"CREATE TABLE {latest} {count.format(source)}"))
    _ok(
        server.ksql(
            f"CREATE TABLE {earliest} {count.format(source)}",
            streamsProperties={"auto.offset.reset": "earliest"},
        )
    )
    _ok(server.ksql(insert))

    def counts(table: str, want: int) -> list[int]:  # Spark starts (cold) within the timeout
        return [
            v["N"] for _, v, _ in _read_topic(memory_broker, table, 1, want=want, timeout_s=300)
        ]

    assert counts(latest, 1) == [1]  # only the record written after it was created
    assert counts(earliest, 3) == [1, 2, 3]

    assert server.stop() == 0  # the same node again, now with the server's setting
    server = server_factory(*args, "--set", "ksql.streams.auto.offset.reset=earliest")
    _ok(server.ksql(insert))
    _ok(server.ksql(f"CREATE TABLE {configured} {count.format(source)}"))
    assert counts(latest, 2) == [1, 2]  # resumed from its checkpoint, not from where it began
    assert counts(earliest, 4) == [1, 2, 3, 4]
    assert counts(configured, 4) == [1, 2, 3, 4]
    refused = server.ksql(
        f"CREATE TABLE X_{suffix} {count.format(source)}",
        streamsProperties={"auto.offset.reset": "none"},
    )
    assert refused.status_code == 400, refused.text
    assert "'none' is not valid for this property within KSQL" in refused.json()["message"]
    assert server.stop() == 0
