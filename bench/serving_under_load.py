"""Does running persistent queries hurt serving? Pull-query and event-loop latency with 10 busy
persistent queries against none, on one server.

Run ``python -m bench.serving_under_load`` (about 2 minutes). It starts an in-memory embedded broker and
one ``headwater server``, materializes a table of 1,000 rows, then measures pull queries by key (p50,
p99 over ``--queries`` sequential requests) and ``GET /info`` (answered on the event loop: a stalled
loop shows here first, as it would in heartbeats), first with no persistent query, then while 10
persistent queries each process a stream fed at ``--rate`` records/s. Spark's driver runs in the
server's child process, so the two figures should stay close.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

import httpx

from bench._server import BenchServer, bench_node
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import producer


def _latencies(
    client: httpx.Client, server: BenchServer, count: int
) -> tuple[list[float], list[float]]:
    pulls, infos = [], []
    for i in range(count):
        started = time.perf_counter()
        answer = client.post(
            f"{server.url}/query", json={"ksql": f"SELECT * FROM users WHERE id = 'u{i % 1000}';"}
        )
        pulls.append(time.perf_counter() - started)
        if answer.status_code != 200 or '"row"' not in answer.text:
            raise SystemExit(f"pull query failed: {answer.status_code} {answer.text[:300]}")
        started = time.perf_counter()
        client.get(f"{server.url}/info")
        infos.append(time.perf_counter() - started)
    return pulls, infos


def _show(label: str, values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"{label} p50 {statistics.median(values) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=2000, help="records/s into the busy stream")
    args = parser.parse_args(argv)
    with bench_node() as (broker, server):
        _run(broker, server, args.queries, args.rate)
    return 0


def _run(broker: EmbeddedBroker, server: BenchServer, queries: int, rate: int) -> None:
    writer = producer(broker.settings(), "bench")
    server.ksql(
        "CREATE TABLE users (id STRING PRIMARY KEY, v INT) WITH (kafka_topic='users', "
        "partitions=2, value_format='JSON');"
    )
    for i in range(1000):
        writer.produce("users", json.dumps({"V": i}).encode(), f"u{i}".encode())
    writer.flush()
    client = httpx.Client(timeout=30)
    deadline = time.monotonic() + 60
    while (
        '"row"'
        not in client.post(
            f"{server.url}/query", json={"ksql": "SELECT * FROM users WHERE id = 'u999';"}
        ).text
    ):
        if time.monotonic() > deadline:
            raise SystemExit("the table was not materialized in 60 s")
        time.sleep(0.2)
    pulls, infos = _latencies(client, server, queries)
    print(f"no persistent query:      {_show('pull by key', pulls)}; {_show('GET /info', infos)}")

    server.ksql(
        "CREATE STREAM busy (id STRING KEY, n INT) WITH (kafka_topic='busy', "
        "partitions=2, value_format='JSON');"
    )
    for n in range(10):
        server.ksql(
            f"CREATE STREAM busy_out{n} AS SELECT id, n * {n} AS m FROM busy WHERE n % 10 <> {n};"
        )
    stop = threading.Event()

    def feed() -> None:
        i = 0
        while not stop.is_set():
            started = time.monotonic()
            for _ in range(rate // 10):
                writer.produce("busy", json.dumps({"N": i}).encode(), f"k{i % 100}".encode())
                i += 1
            writer.poll(0)
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        writer.flush()

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        time.sleep(30)  # Spark starts, the 10 queries start and catch up
        pulls, infos = _latencies(client, server, queries)
    finally:
        stop.set()
        feeder.join()
    print(
        f"10 busy queries ({rate}/s in): {_show('pull by key', pulls)}; {_show('GET /info', infos)}"
    )


if __name__ == "__main__":
    sys.exit(main())
