"""Benchmark: how long a ``GET /metrics`` scrape takes with 100 persistent queries (issue 34: < 50 ms).

Builds one in-process server's app (an in-memory embedded broker, the server's real objects:
command runner, restorer, admission queues, traffic counters) and gives it, in place of the Spark
engine, a stand-in whose ``statuses()`` returns what 100 running queries report (each with two
source topics of 4 partitions, their ends and event-time lags, records written, batches, errors and the last batch's
duration) and ``health()`` this process as the Spark child: the collector's work per query is the
same as on a live node, without starting 100 queries on Spark (which this 2-core machine cannot
hold). It also creates --tables tables of 4 partitions, so the table-partition series are real.
Then it scrapes --scrapes times through Starlette's TestClient and prints the latency percentiles
and the exposition's size beside the target.

Run from the repository root: ``python -m bench.metrics_scrape [--queries 100] [--scrapes 200]``.
This module does I/O (a broker, temporary folders); it is never collected by pytest.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
import uuid
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from headwater.engine.spark.host import EngineHealth
from headwater.gateway.app import create_app
from headwater.gateway.startup import open_services
from headwater.kafka.broker import EmbeddedBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

TARGET_MS = 50.0


class _Engine:
    """What ``QueryEngine`` reports for ``count`` running queries."""

    def __init__(self, count: int) -> None:
        self._statuses = {
            f"CSAS_SINK_{i}_{i}": {
                "state": "RUNNING",
                "message": "",
                "restarts": 0,
                "startedMs": 1_700_000_000_000,
                "processed": {
                    f"source_{i}": {str(p): 10_000 + p for p in range(4)},
                    f"table_{i}": {str(p): 500 + p for p in range(4)},
                },
                "ends": {
                    f"source_{i}": {str(p): 10_010 + p for p in range(4)},
                    f"table_{i}": {str(p): 500 + p for p in range(4)},
                },
                "lagMs": {
                    f"source_{i}": {str(p): 250 * p for p in range(4)},
                    f"table_{i}": {str(p): 0 for p in range(4)},
                },
                "lastBatchMs": 120,
                "records": 40_000 + i,
                "batches": 400,
                "errors": 3,
                "lastError": "bad record",
                "lastErrorMs": 1_700_000_100_000,
                "replayedSkipped": 0,
            }
            for i in range(count)
        }

    def statuses(self) -> dict[str, dict[str, Any]]:
        return {q: dict(s) for q, s in self._statuses.items()}

    def health(self) -> EngineHealth:
        return EngineHealth("UP", os.getpid(), time.time())


def _scrapes(broker: EmbeddedBroker, args: argparse.Namespace) -> tuple[list[float], str]:
    """Each scrape's seconds, and the last exposition."""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        services = stack.enter_context(
            open_services(
                broker.settings(),
                f"scrape-{uuid.uuid4().hex[:8]}",
                folder,
                stores_dir=folder,
                stores_in_memory=True,
            )
        )
        engine: Any = _Engine(args.queries)
        services = dataclasses.replace(services, queries=engine)
        client = stack.enter_context(TestClient(create_app(services)))
        for t in range(args.tables):
            answer = client.post(
                "/ksql",
                json={
                    "ksql": f"CREATE TABLE T{t} (ID STRING PRIMARY KEY, V INT) WITH "
                    f"(kafka_topic='scrape_t{t}_{uuid.uuid4().hex[:6]}', "
                    "partitions=4, value_format='JSON');"
                },
            )
            assert answer.status_code == 200, answer.text
        time.sleep(2)  # the restorer takes the tables up
        for _ in range(10):  # warm up
            client.get("/metrics")
        seconds = []
        for _ in range(args.scrapes):
            started = time.perf_counter()
            answer = client.get("/metrics")
            seconds.append(time.perf_counter() - started)
            assert answer.status_code == 200
        return seconds, answer.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    broker = EmbeddedBroker(None)
    broker.start()
    try:
        seconds, text = _scrapes(broker, args)
    finally:
        broker.stop()
    ms = sorted(s * 1000 for s in seconds)
    p50, p99 = statistics.median(ms), ms[max(0, int(len(ms) * 0.99) - 1)]
    print(
        f"GET /metrics with {args.queries} queries and {args.tables} tables of 4 partitions: "
        f"{args.scrapes} scrapes, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms; "
        f"{len(text.encode()) / 1024:.0f} KiB, {text.count(chr(10))} lines"
    )
    print(
        f"target: a scrape under {TARGET_MS:.0f} ms with 100 queries: "
        + ("met" if p50 < TARGET_MS else "NOT met")
        + f" (p50; p99 {'under' if p99 < TARGET_MS else 'over'} it)"
    )


if __name__ == "__main__":
    main()
