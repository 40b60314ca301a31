"""Aggregating persistent queries (CREATE TABLE ... AS SELECT ... GROUP BY) on Spark: freshness,
throughput, state, restart.

Run ``python -m bench.aggregates`` (about 10 minutes on 2 cores). It starts an in-memory embedded
broker and one ``headwater server`` (Spark in its child process, as always) and measures what a
user sees:

1. freshness: ``INSERT INTO ... VALUES`` through the REST API -> the updated count answered by a
   pull query through the REST API, steady state, one insert every 250 ms (targets: p50 <= 1 s,
   p99 <= 2 s), next to the floor a micro-batch sets (the same insert -> the record on the sink
   topic, which the pull query additionally waits for the table's restorer to apply);
2. sustained GROUP BY COUNT/SUM throughput with 1k keys and with 1M keys (records/s from the first
   record produced to the last update on the sink topic, CPU s per 1k records of the whole server
   process tree);
3. the 1M-key query's state: checkpoint size on disk, and the restart time (server stopped, started
   again on the same state: until a new record's update appears on the sink topic);
4. a windowed aggregation's throughput (TUMBLING 1 minute, COUNT per key, 1k keys);
5. a stream-table join's throughput (``CREATE STREAM ... AS SELECT ... LEFT JOIN`` a table of 1k
   rows; records/s from the first record produced to the last joined record on the sink topic).

Issue 30's target for the 1M-key count, the windowed count and the join: 30,000 records/s each.

Options: ``--records N`` (1k-key and windowed inputs, default 300000), ``--big-keys N`` (distinct
keys of the big run, default 1000000; one record each), ``--samples N`` (freshness, default 60).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import httpx
from confluent_kafka import TopicPartition

from bench._processes import cpu_seconds, rss_mb
from bench._server import BenchServer, bench_node, wait_records
from bench._workloads import produce_all
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer, producer
from tests.support.node import percentile

PARTITIONS = 2


def _produce(broker: EmbeddedBroker, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    writer = producer(broker.settings(), "bench-agg")
    started = time.monotonic()
    produce_all(writer, topic, records)
    writer.flush(300)
    return time.monotonic() - started


def _follow_sum(
    broker: EmbeddedBroker, topic: str, column: str, want: int, timeout_s: float
) -> float:
    """Seconds until the latest values of ``column`` per key on ``topic`` add up to ``want``."""
    started = time.monotonic()
    reader = consumer(broker.settings(), f"bench-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=50)
    reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latest: dict[bytes, int] = {}
    total = 0
    try:
        while total < want:
            if time.monotonic() - started > timeout_s:
                raise SystemExit(
                    f"{topic}: {column} adds up to {total} of {want} after {timeout_s:g} s"
                )
            for message in reader.consume(20_000, 0.1):
                if message.error() is not None:
                    continue
                value = json.loads(message.value() or b"null")
                new = 0 if value is None else int(value[column])
                key = message.key() or b""
                total += new - latest.get(key, 0)
                latest[key] = new
    finally:
        reader.close()
    return time.monotonic() - started


def _pull_count(client: httpx.Client, url: str, table: str, key: str) -> int | None:
    answer = client.post(
        f"{url}/query", json={"ksql": f"SELECT n FROM {table} WHERE id = '{key}';"}
    )
    if answer.status_code != 200:
        return None
    rows = [item["row"]["columns"] for item in answer.json() if "row" in item]
    return int(rows[0][0]) if rows else None


def _freshness(broker: EmbeddedBroker, server: BenchServer, samples: int) -> None:
    server.ksql(
        "CREATE STREAM fr_in (id STRING KEY, v INT) WITH (kafka_topic='fr_in', "
        f"partitions={PARTITIONS}, value_format='JSON');"
    )
    server.ksql("CREATE TABLE fr AS SELECT id, COUNT(*) AS n FROM fr_in GROUP BY id;")
    reader = consumer(broker.settings(), "bench-fresh", fetch_wait_max_ms=10)
    reader.assign([TopicPartition("FR", p, 0) for p in range(PARTITIONS)])
    visible, on_topic = [], []
    with httpx.Client(timeout=10) as client:
        for i in range(samples + 5):  # the first few warm Spark up
            key = f"k{i % 5}"
            before = _pull_count(client, server.url, "FR", key) or 0
            sent = time.monotonic()
            server.ksql(f"INSERT INTO fr_in (id, v) VALUES ('{key}', {i});")
            seen_topic = None
            while time.monotonic() - sent < 30:
                if seen_topic is None and any(
                    m.error() is None
                    and m.key() == key.encode()
                    and json.loads(m.value() or b"{}").get("N", 0) > before
                    for m in reader.consume(100, 0)
                ):
                    seen_topic = time.monotonic() - sent
                if (_pull_count(client, server.url, "FR", key) or 0) > before:
                    break
                time.sleep(0.005)
            if i >= 5:
                visible.append(time.monotonic() - sent)
                on_topic.append(seen_topic if seen_topic is not None else visible[-1])
            time.sleep(max(0.0, 0.25 - (time.monotonic() - sent)))
    reader.close()
    visible.sort()
    on_topic.sort()
    print(
        f"1. INSERT (REST) -> updated count in a pull query (REST), {samples} inserts at "
        f"<= 4/s: p50 {percentile(visible, 50) * 1000:.0f} ms, p99 "
        f"{percentile(visible, 99) * 1000:.0f} ms (targets 1000 / 2000 ms); the micro-batch "
        f"floor (INSERT -> update on the sink topic): p50 {percentile(on_topic, 50) * 1000:.0f} "
        f"ms, p99 {percentile(on_topic, 99) * 1000:.0f} ms"
    )
    server.ksql("TERMINATE ALL;")


@dataclass(frozen=True)
class Aggregate:
    """A running COUNT/SUM per key query of this benchmark: its input topic and how to wait."""

    broker: EmbeddedBroker
    source: str
    table: str

    @staticmethod
    def records(count: int, keys: int) -> list[tuple[bytes, bytes]]:
        """``count`` input records over ``keys`` keys (``k0``, ``k1``, ...)."""
        return [
            (
                f"k{i % keys}".encode(),
                json.dumps({"ITEM": f"item{i % 100}", "AMOUNT": i % 10}).encode(),
            )
            for i in range(count)
        ]

    def wait(self, records: int, timeout_s: float) -> float:
        """Seconds until the latest counts per key add up to ``records``."""
        return _follow_sum(self.broker, self.table, "N", records, timeout_s)


def start_aggregate(
    broker: EmbeddedBroker, server: BenchServer, name: str, windowed: bool = False
) -> Aggregate:
    """``CREATE TABLE name AS SELECT id, COUNT(*), SUM(amount) ... GROUP BY id`` (windowed:
    TUMBLING 1 minute) over a new stream, running: its first record counted."""
    source = f"{name}_in"
    server.ksql(
        f"CREATE STREAM {source} (id STRING KEY, item STRING, amount INT) WITH "
        f"(kafka_topic='{source}', partitions={PARTITIONS}, value_format='JSON');"
    )
    window = " WINDOW TUMBLING (SIZE 1 MINUTE)" if windowed else ""
    server.ksql(
        f"CREATE TABLE {name} AS SELECT id, COUNT(*) AS n, SUM(amount) AS total FROM "
        f"{source}{window} GROUP BY id;"
    )
    _produce(broker, source, [(b"warm", b'{"ITEM": "w", "AMOUNT": 1}')])
    aggregate = Aggregate(broker, source, name.upper())
    aggregate.wait(1, 180)  # the query runs
    return aggregate


def _throughput(
    broker: EmbeddedBroker,
    server: BenchServer,
    name: str,
    keys: int,
    records: int,
    windowed: bool = False,
) -> None:
    aggregate = start_aggregate(broker, server, name, windowed)
    payload = aggregate.records(records, keys)
    cpu_before = cpu_seconds(server.process.pid)
    started = time.monotonic()
    produced = _produce(broker, aggregate.source, payload)
    aggregate.wait(records + 1, 1800)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(server.process.pid) - cpu_before
    what = "windowed (TUMBLING 1 minute) COUNT/SUM" if windowed else "GROUP BY COUNT/SUM"
    target = "target 30,000; " if windowed or keys == records else ""
    print(
        f"{what}, {records:,} records over {keys:,} keys on {PARTITIONS} partitions: "
        f"{records / elapsed:,.0f} records/s sustained ({target}producing them took "
        f"{produced:.1f} s); CPU {cpu / records * 1000:.3f} s per 1k records"
    )


def start_join(broker: EmbeddedBroker, server: BenchServer, name: str, rows: int) -> str:
    """``CREATE STREAM name AS SELECT ... FROM name_in LEFT JOIN name_users`` over a table of
    ``rows`` rows, running: its first record joined. Returns the stream's input topic."""
    source, users = f"{name}_in", f"{name}_users"
    server.ksql(
        f"CREATE TABLE {users} (id STRING PRIMARY KEY, name STRING, tier INT) WITH "
        f"(kafka_topic='{users}', partitions={PARTITIONS}, value_format='JSON');"
    )
    server.ksql(
        f"CREATE STREAM {source} (id STRING KEY, item STRING, amount INT) WITH "
        f"(kafka_topic='{source}', partitions={PARTITIONS}, value_format='JSON');"
    )
    _produce(
        broker,
        users,
        [
            (f"k{i}".encode(), json.dumps({"NAME": f"user{i}", "TIER": i % 3}).encode())
            for i in range(rows)
        ],
    )
    server.ksql(
        f"CREATE STREAM {name} AS SELECT s.id, item, amount, name, tier FROM {source} s "
        f"LEFT JOIN {users} u ON s.id = u.id;"
    )
    _produce(broker, source, [(b"k1", b'{"ITEM": "w", "AMOUNT": 1}')])
    wait_records(broker, name.upper(), 1, 180)  # the query runs
    return source


def _join_throughput(broker: EmbeddedBroker, server: BenchServer, records: int) -> None:
    rows = 1_000
    source = start_join(broker, server, "joined", rows)
    payload = Aggregate.records(records, rows)
    cpu_before = cpu_seconds(server.process.pid)
    started = time.monotonic()
    produced = _produce(broker, source, payload)
    wait_records(broker, "JOINED", records + 1, 1800)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(server.process.pid) - cpu_before
    print(
        f"stream-table LEFT JOIN, {records:,} records against {rows:,} table rows on "
        f"{PARTITIONS} partitions: {records / elapsed:,.0f} records/s sustained (target 30,000; "
        f"producing them took {produced:.1f} s); CPU {cpu / records * 1000:.3f} s per 1k records"
    )


def _state_and_restart(broker: EmbeddedBroker, server: BenchServer, name: str) -> None:
    query = next(
        q["id"] for q in server.ksql("SHOW QUERIES;")[0]["queries"] if q["sinks"] == [name.upper()]
    )
    folder = server.folder / "node" / "checkpoints" / query
    size = int(
        subprocess.run(
            ["du", "-sb", str(folder)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )
    print(
        f"3. the 1M-key query's checkpoint (offsets + RocksDB state): {size / 2**20:,.0f} MB; "
        f"server RSS {rss_mb(server.process.pid):,.0f} MB"
    )
    started = time.monotonic()
    server.restart()
    healthy = time.monotonic() - started
    reader = consumer(broker.settings(), "bench-restart", fetch_wait_max_ms=10)
    reader.assign([TopicPartition(name.upper(), p, 0) for p in range(PARTITIONS)])
    while reader.consume(50_000, 1.0):
        pass  # past what the sink holds already
    _produce(broker, f"{name}_in", [(b"after-restart", b'{"ITEM": "x", "AMOUNT": 1}')])
    while True:
        if any(m.error() is None and m.key() == b"after-restart" for m in reader.consume(100, 0.1)):
            break
        if time.monotonic() - started > 600:
            raise SystemExit("no update 600 s after the restart")
    reader.close()
    print(
        f"   restart on the same state: healthy in {healthy:.1f} s, the query's first new "
        f"update {time.monotonic() - started:.1f} s after the start (Spark starts cold, the "
        f"state store restores from the checkpoint)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--big-keys", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=60)
    args = parser.parse_args(argv)
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    with bench_node() as (broker, server):
        _freshness(broker, server, args.samples)
        print("2.", end=" ")
        _throughput(broker, server, "agg_small", 1_000, args.records)
        server.ksql("TERMINATE ALL;")
        print("  ", end=" ")
        _throughput(broker, server, "agg_big", args.big_keys, args.big_keys)
        _state_and_restart(broker, server, "agg_big")
        server.ksql("TERMINATE ALL;")
        print("4.", end=" ")
        _throughput(broker, server, "agg_win", 1_000, args.records, windowed=True)
        server.ksql("TERMINATE ALL;")
        print("5.", end=" ")
        _join_throughput(broker, server, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
