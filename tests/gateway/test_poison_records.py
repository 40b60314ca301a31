"""Poison records through a real server (issue 28): records no format can read, produced straight to
a source topic between good ones, cost one processing-log entry each and nothing else. The CSAS, the
CTAS and a stream-table LEFT JOIN on the stream stay RUNNING and write every good record (the join's
table has a poison row too); pull queries (a stream scan, a table's key lookup and scan) answer
cleanly; a push query streams on past them. Real broker, Spark.

One server, one story: each server starts Spark with its first query (~20-30 s on 2 cores).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka import TopicPartition

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer, producer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

GOOD = 1000
KEYS = 10
POISON = [  # (value, what its processing-log entry says)
    (b'{"ITEM":' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper than 256 levels"),  # ~10 KB
    (b'{"ITEM": "a\xff\xfe", "QTY": 1}', "invalid JSON"),  # not UTF-8
    (b'{"ITEM": "a\x00", "QTY": 1}', "Invalid control character"),  # a raw NUL
    (b'{"ITEM": "a", "QTY": "many"}', "QTY: expected INTEGER"),  # a wrong type
    (b'{"ITEM": "a", "QT', "invalid JSON"),  # cut short
]


def _ok(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _read(
    broker: EmbeddedBroker, topic: str, want: int, timeout_s: float = 180.0, settle_s: float = 2.0
) -> list[tuple]:
    """(key, value) of the topic's records: once ``want`` are there (or after ``timeout_s``), with
    what else arrives in the next ``settle_s`` (so that a test sees records it did not expect)."""
    reader = consumer(broker.settings(), f"check-{uuid.uuid4().hex[:6]}")
    got: list[tuple] = []
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(got) >= want:
                deadline = min(deadline, time.monotonic() + settle_s)
            for message in reader.consume(500, 0.5):
                if message.error() is None:
                    got.append((message.key(), message.value()))
    finally:
        reader.close()
    return got


def _rows(response: httpx.Response) -> list[list]:
    """The rows of a pull query's answer, which must end cleanly (no error item, no cut)."""
    items = _ok(response)
    assert "header" in items[0], items[:1]
    assert not [i for i in items if "errorMessage" in i], items[-3:]
    assert [i["finalMessage"] for i in items if "finalMessage" in i] in ([], ["Query Completed"])
    return [i["row"]["columns"] for i in items if "row" in i]


def test_poison_records_are_skipped_and_every_query_goes_on(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    src, users, out, counts = (
        f"SRC_{suffix}",
        f"USERS_{suffix}",
        f"OUT_{suffix}",
        f"COUNTS_{suffix}",
    )
    people, joined = f"PEOPLE_{suffix}", f"JOINED_{suffix}"
    service = f"poison_{suffix.lower()}_"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        service,
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {src} (id STRING KEY, item STRING, qty INT) WITH "
            f"(kafka_topic='{src}', partitions=1, value_format='JSON');"
        )
    )
    _ok(
        server.ksql(
            f"CREATE TABLE {users} (id STRING PRIMARY KEY, name STRING) WITH "
            f"(kafka_topic='{users}', partitions=1, value_format='JSON');"
        )
    )
    _ok(server.ksql(f"CREATE STREAM {out} AS SELECT id, UCASE(item) AS item, qty FROM {src};"))
    _ok(
        server.ksql(
            f"CREATE TABLE {counts} AS SELECT id, COUNT(*) AS n, SUM(qty) AS total "
            f"FROM {src} GROUP BY id;"
        )
    )

    _ok(
        server.ksql(
            f"CREATE TABLE {people} (id STRING PRIMARY KEY, name STRING) WITH "
            f"(kafka_topic='{people}', partitions=1, value_format='JSON');"
        )
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {joined} AS SELECT s.id AS id, s.item AS item, p.name AS name "
            f"FROM {src} s LEFT JOIN {people} p ON s.id = p.id;"
        )
    )

    # the join's table first: a row for k1, a poison row for k3
    writer = producer(memory_broker.settings(), "poison-test")
    writer.produce(people, b'{"NAME": "kim"}', b"k1")
    writer.produce(people, POISON[1][0], b"k3")
    assert writer.flush(30) == 0
    # the good records, with a poison record after every 200th (and one last); the second half
    # once the join has written the first, so that its table rows are read by then
    for i in range(GOOD):
        if i == GOOD // 2:
            assert writer.flush(30) == 0
            assert len(_read(memory_broker, joined, GOOD // 2, settle_s=0)) == GOOD // 2
        writer.produce(src, json.dumps({"ITEM": f"i{i}", "QTY": 1}).encode(), b"k%d" % (i % KEYS))
        if i % 200 == 199:
            writer.produce(src, POISON[i // 200][0], b"bad")
    writer.produce(users, b'{"NAME": "ann"}', b"a")
    writer.produce(users, POISON[0][0], b"b")  # the row of key b cannot be read
    writer.produce(users, b'{"NAME": "cy"}', b"c")
    assert writer.flush(30) == 0

    # the CSAS writes every good record, in order, and nothing for the poison
    written = _read(memory_broker, out, GOOD)
    assert [json.loads(v)["ITEM"] for _k, v in written] == [f"I{i}" for i in range(GOOD)], (
        f"{len(written)} of {GOOD} written; server log:\n{server.log()}"
    )
    # the join writes every good record once, in order, with the table's name where it has one
    joined_rows = [json.loads(v) for _k, v in _read(memory_broker, joined, GOOD)]
    assert [r["ITEM"] for r in joined_rows] == [f"i{i}" for i in range(GOOD)], server.log()
    for i, r in enumerate(joined_rows):
        kim = i % KEYS == 1 and (i >= GOOD // 2 or r["NAME"] is not None)
        assert r["NAME"] == ("kim" if kim else None), (i, r)
    # the CTAS counts every good record: pull queries read its materialized table
    wanted = sorted([f"k{k}", GOOD // KEYS, GOOD // KEYS] for k in range(KEYS))
    deadline = time.monotonic() + 120
    while True:
        scanned = server.query(f"SELECT * FROM {counts};")
        rows = sorted(_rows(scanned)) if scanned.status_code == 200 else []
        if rows == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert rows == wanted, scanned.text
    # the answer says the query writing the table runs, and its lag behind its source is known
    # (from Spark's progress: the offsets its last committed micro-batch read to)
    writers = scanned.json()[0]["header"]["writtenBy"]
    assert [(w["state"], w["lag"] is not None) for w in writers] == [("RUNNING", True)], writers
    queries = _ok(server.ksql("SHOW QUERIES;"))[0]["queries"]
    assert [q["state"] for q in queries] == ["RUNNING"] * 3, queries

    # each poison record is in the processing log, once per query, saying what was wrong (the
    # join's table row once: only the join reads it)
    logged = 3 * len(POISON) + 1
    log = _read(memory_broker, f"{service}ksql_processing_log", logged, timeout_s=60)
    entries = [json.loads(v)["MESSAGE"] for _k, v in log]
    assert len(entries) == logged, entries
    assert {e["TYPE"] for e in entries} == {"deserialization"}
    for (_value, says), offset in zip(POISON, (200, 401, 602, 803, 1004)):
        found = [e for e in entries if e["OFFSET"] == offset and e["TOPIC"] == src]
        assert len(found) == 3 and all(says in e["ERRORMESSAGE"] for e in found), (offset, found)
    found = [e for e in entries if e["TOPIC"] == people]
    assert [(e["OFFSET"], POISON[1][1] in e["ERRORMESSAGE"]) for e in found] == [(1, True)], found
    described = _ok(server.ksql(f"DESCRIBE {out} EXTENDED;"))[0]["sourceDescription"]
    assert f"processing-errors: {len(POISON)}" in described["errorStats"]

    # pull queries: the stream's scan meets every poison record, the table's one stored row
    scanned = server.query(f"SELECT item FROM {src};")
    assert [r[0] for r in _rows(scanned)] == [f"i{i}" for i in range(GOOD)]
    deadline = time.monotonic() + 60
    while True:  # the table is materialized from its topic
        rows = _rows(server.query(f"SELECT * FROM {users};"))
        if rows == [["a", "ann"], ["c", "cy"]] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert rows == [["a", "ann"], ["c", "cy"]]
    assert _rows(server.query(f"SELECT * FROM {users} WHERE id = 'b';")) == []
    assert _rows(server.query(f"SELECT * FROM {users} WHERE id = 'c';")) == [["c", "cy"]]

    # a push query from the beginning streams every good record past the poison ones
    with httpx.stream(
        "POST",
        f"{server.url}/query-stream",
        timeout=120,
        json={
            "sql": f"SELECT id, item FROM {src} EMIT CHANGES LIMIT {GOOD};",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        lines = [json.loads(line) for line in streamed.iter_lines() if line]
    assert lines[0]["columnNames"] == ["ID", "ITEM"]
    assert [row[1] for row in lines[1:]] == [f"i{i}" for i in range(GOOD)], lines[-3:]
    assert server.stop() == 0
