"""Push queries, /inserts-stream and a stream-table join: latency, throughput, fan-out, cost.

Run ``python -m bench.push_queries`` (about 4-6 minutes). It starts an in-memory embedded broker and one
``headwater server`` process on it (Spark in the server's child process, as always), and measures as a
client sees it, over HTTP/1.1 (``/query-stream``):

1. a push query without state (filter + projection, served from a Kafka consumer): time to its first
   row (one record waiting, ``auto.offset.reset=earliest``), and produce -> row seen by the client, one
   record every 100 ms: p50 / p99;
2. a push query with state (``GROUP BY``, a transient Spark query): time to its first row (Spark cold
   and warm), and produce -> updated row seen: p50 / p99;
3. 100 concurrent push clients on one stream: rows delivered per second in total while 20k records
   arrive, the server's CPU (whole process tree) and RSS;
4. ``/inserts-stream``: rows acknowledged per second over one stream of 20k rows;
5. a stream-table join (``CREATE STREAM ... AS SELECT ... LEFT JOIN``) on Spark: records/s over 100k
   stream records against a 1k-row table, and produce -> joined record on the sink topic: p50 / p99.

Options: ``--samples N`` (latency samples, default 50), ``--clients N`` (default 100), ``--records N``
(fan-out and join throughput inputs, default 20000 / 100000).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time
import uuid
from typing import Any

import httpx
from confluent_kafka import TopicPartition

from bench._processes import cpu_seconds, rss_mb
from bench._server import BenchServer, bench_node, wait_records
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer, producer


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1000:.0f} ms, p99 {_p(values, 0.99) * 1000:.0f} ms"


class _Stream:
    """One /query-stream push query read in a thread: its rows with the time each arrived."""

    def __init__(self, url: str, sql: str, earliest: bool = False) -> None:
        self.rows: list[tuple[float, list[Any]]] = []
        self.header: dict[str, Any] | None = None
        self.started = time.monotonic()
        self._ready = threading.Event()
        body = {
            "sql": sql,
            "properties": {"auto.offset.reset": "earliest" if earliest else "latest"},
        }
        self._thread = threading.Thread(target=self._run, args=(url, body), daemon=True)
        self._thread.start()

    def _run(self, url: str, body: dict[str, Any]) -> None:
        try:
            with httpx.stream("POST", f"{url}/query-stream", json=body, timeout=None) as answer:
                for line in answer.iter_lines():
                    if not line:
                        continue
                    item = json.loads(line)
                    if self.header is None:
                        self.header = item
                        self._ready.set()
                    elif isinstance(item, list):
                        self.rows.append((time.monotonic(), item))
        except httpx.HTTPError:
            pass
        finally:
            self._ready.set()

    def wait_header(self, timeout_s: float = 60) -> None:
        self._ready.wait(timeout_s)
        if self.header is None or "queryId" not in self.header:
            raise SystemExit(f"push query failed: {self.header}")

    def wait_rows(self, count: int, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while len(self.rows) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"{len(self.rows)} of {count} push rows after {timeout_s} s")
            time.sleep(0.002)
        return self.rows[count - 1][0]

    def close(self, url: str) -> None:
        if self.header is not None and "queryId" in self.header:
            httpx.post(f"{url}/close-query", json={"queryId": self.header["queryId"]}, timeout=10)
        self._thread.join(10)


def _latency(stream: _Stream, writer: Any, topic: str, samples: int, value: Any) -> list[float]:
    """produce -> row seen, one record every 100 ms (``value(i)`` gives the record's key, value)."""
    seen: list[float] = []
    for i in range(samples):
        before = len(stream.rows)
        key, data = value(i)
        sent = time.monotonic()
        writer.produce(topic, json.dumps(data).encode(), key.encode())
        writer.flush()
        arrived = stream.wait_rows(before + 1, 30)
        seen.append(arrived - sent)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - sent)))
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--join-records", type=int, default=100_000)
    args = parser.parse_args(argv)
    print(f"python {platform.python_version()}, {os.cpu_count()} cores")
    with bench_node() as (broker, server):
        _run(broker, server, args)
    return 0


def _run(broker: EmbeddedBroker, server: BenchServer, args: argparse.Namespace) -> None:
    writer = producer(broker.settings(), "bench")
    server.ksql(
        "CREATE STREAM clicks (user_id STRING KEY, page STRING, ms INT) WITH "
        "(kafka_topic='clicks', partitions=2, value_format='JSON');"
    )
    writer.produce("clicks", json.dumps({"PAGE": "/first", "MS": 1}).encode(), b"u0")
    writer.flush()

    # 1. without state
    stream = _Stream(
        server.url, "SELECT user_id, page FROM clicks WHERE ms > 0 EMIT CHANGES;", earliest=True
    )
    stream.wait_header()
    first = stream.wait_rows(1, 30) - stream.started
    lat = _latency(
        stream,
        writer,
        "clicks",
        args.samples,
        lambda i: (f"u{i % 10}", {"PAGE": f"/p{i}", "MS": 5}),
    )
    stream.close(server.url)
    print(
        f"1. push query without state: first row {first * 1000:.0f} ms; produce -> row seen, "
        f"{args.samples} records at 10/s: {_ms(lat)}"
    )

    # 2. with state (a transient Spark query): cold, then warm
    sql = "SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id EMIT CHANGES;"
    stream = _Stream(server.url, sql, earliest=True)
    stream.wait_header(120)
    cold = stream.wait_rows(1, 180) - stream.started
    stream.close(server.url)
    stream = _Stream(server.url, sql, earliest=True)
    stream.wait_header(120)
    warm = stream.wait_rows(1, 180) - stream.started
    time.sleep(2)  # the backlog's updates, then one update per record
    lat = _latency(
        stream, writer, "clicks", args.samples, lambda i: (f"s{i}", {"PAGE": "/s", "MS": 1})
    )
    stream.close(server.url)
    print(
        f"2. push query with state (GROUP BY on Spark): first row cold {cold:.1f} s (Spark "
        f"starts), warm {warm:.1f} s; produce -> updated row seen: {_ms(lat)}"
    )

    # 3. fan-out: many clients on one stream
    streams = [
        _Stream(server.url, "SELECT * FROM clicks EMIT CHANGES;") for _ in range(args.clients)
    ]
    for s in streams:
        s.wait_header(60)
    time.sleep(1)
    cpu_before = cpu_seconds(server.process.pid)
    started = time.monotonic()
    for i in range(args.records):
        while True:
            try:
                writer.produce(
                    "clicks",
                    json.dumps({"PAGE": f"/f{i}", "MS": i}).encode(),
                    f"f{i % 1000}".encode(),
                )
                break
            except BufferError:
                writer.poll(0.05)
    writer.flush()
    want = args.records
    deadline = time.monotonic() + 300
    while min(len(s.rows) for s in streams) < want and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    delivered = sum(min(len(s.rows), want) for s in streams)
    cpu = cpu_seconds(server.process.pid) - cpu_before
    rss = rss_mb(server.process.pid)
    for s in streams:
        s.close(server.url)
    print(
        f"3. {args.clients} push clients on one stream, {args.records} records: {delivered:,} rows "
        f"delivered in {elapsed:.1f} s = {delivered / elapsed:,.0f} rows/s; server CPU "
        f"{cpu / elapsed * 100:.0f}% of one core, RSS {rss:.0f} MB (whole process tree)"
    )

    # 4. /inserts-stream
    rows = args.records
    body = (
        json.dumps({"target": "CLICKS"})
        + "\n"
        + "".join(
            json.dumps({"USER_ID": f"i{i % 100}", "PAGE": f"/i{i}", "MS": i}) + "\n"
            for i in range(rows)
        )
    ).encode()
    started = time.monotonic()
    acks = 0
    with httpx.stream("POST", f"{server.url}/inserts-stream", content=body, timeout=300) as answer:
        if answer.status_code != 200:
            print(f"4. /inserts-stream: HTTP {answer.status_code} {answer.read()[:200]!r}")
        else:
            for line in answer.iter_lines():
                if line and json.loads(line).get("status") == "ok":
                    acks += 1
    elapsed = time.monotonic() - started
    print(
        f"4. /inserts-stream, one stream of {rows} rows: {acks:,} acknowledged in {elapsed:.1f} s "
        f"= {acks / elapsed:,.0f} rows/s"
    )

    # 5. a stream-table join on Spark
    _join(broker, server, writer, args)


def _join(
    broker: EmbeddedBroker, server: BenchServer, writer: Any, args: argparse.Namespace
) -> None:
    server.ksql(
        "CREATE TABLE users (id STRING PRIMARY KEY, name STRING, tier INT) WITH "
        "(kafka_topic='users', partitions=2, value_format='JSON');"
    )
    server.ksql(
        "CREATE STREAM visits (user_id STRING KEY, page STRING, ms INT) WITH "
        "(kafka_topic='visits', partitions=2, value_format='JSON');"
    )
    for i in range(1000):
        writer.produce(
            "users", json.dumps({"NAME": f"user{i}", "TIER": i % 3}).encode(), f"u{i}".encode()
        )
    writer.flush()
    server.ksql(
        "CREATE STREAM enriched AS SELECT v.user_id, page, ms, name, tier FROM visits v "
        "LEFT JOIN users u ON v.user_id = u.id;"
    )
    writer.produce("visits", json.dumps({"PAGE": "/warm", "MS": 0}).encode(), b"u1")
    writer.flush()
    wait_records(broker, "ENRICHED", 1, 240)  # the query runs (Spark started, the table read)
    records = args.join_records
    cpu_before = cpu_seconds(server.process.pid)
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                writer.produce(
                    "visits",
                    json.dumps({"PAGE": f"/v{i % 50}", "MS": i}).encode(),
                    f"u{i % 1000}".encode(),
                )
                break
            except BufferError:
                writer.poll(0.05)
    writer.flush()
    wait_records(broker, "ENRICHED", 1 + records, 600)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(server.process.pid) - cpu_before
    print(
        f"5. stream-table LEFT JOIN on Spark, {records:,} records against 1,000 table rows: "
        f"{records / elapsed:,.0f} records/s ({cpu / records * 1000:.2f} CPU s per 1k records)"
    )
    reader = consumer(broker.settings(), f"bench-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=10)
    reader.assign([TopicPartition("ENRICHED", p, 0) for p in range(2)])
    while reader.consume(10_000, 0.5):
        pass
    seen: list[float] = []
    for i in range(args.samples):
        sent = time.monotonic()
        writer.produce("visits", json.dumps({"PAGE": "/lat", "MS": i}).encode(), f"u{i}".encode())
        writer.flush()
        got = False
        while not got and time.monotonic() - sent < 10:
            got = any(m.error() is None for m in reader.consume(10, 0.01))
        seen.append(time.monotonic() - sent)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - sent)))
    reader.close()
    print(
        f"   produce -> joined record on the sink topic, {args.samples} records at 10/s: "
        f"{_ms(seen)}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
