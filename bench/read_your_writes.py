"""Benchmark: INSERT then a pull query by the same DB-API connection, on one idle node (issue 19).

Starts an in-memory embedded broker in this process and a ``headwater server`` on it, creates a
table, then --rounds times: ``INSERT INTO T (ID, V) VALUES (?, ?)`` and at once ``SELECT * FROM T
WHERE ID = ?`` for the key just written, on one ``headwater.dbapi`` connection (which sends the
written offsets with the query: the answer must include the write). Prints the pull's latency
(p50, p99, max), the INSERT's, and how many pulls missed their row (must be 0). Target: the pull
right after an INSERT, p50 <= 30 ms.

Run from the repository root: ``python -m bench.read_your_writes [--rounds N]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from tests.support.node import Server, ksql, percentile, versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    from headwater import dbapi
    from headwater.kafka.broker import EmbeddedBroker

    print(versions("httpx", "lmdb"))
    work = Path(tempfile.mkdtemp(prefix="bench-ryw-"))
    try:
        with EmbeddedBroker(None, port=0) as broker, httpx.Client(timeout=30.0) as client:
            server = Server(
                [
                    "-b",
                    broker.bootstrap_servers,
                    "--service-id",
                    "ryw",
                    "--state-dir",
                    str(work / "node"),
                ],
                work / "server.log",
            )
            with server:
                server.wait_healthy()
                ksql(
                    client,
                    server.url,
                    "CREATE TABLE T (ID STRING PRIMARY KEY, V BIGINT) WITH "
                    f"(kafka_topic='ryw', partitions={args.partitions}, value_format='JSON');",
                )
                inserts: list[float] = []
                pulls: list[float] = []
                missed = 0
                with dbapi.connect(server.url) as connection:
                    cursor = connection.cursor()
                    for i in range(-20, args.rounds):  # 20 rounds of warm-up
                        key = f"k{i + 20}"
                        start = time.perf_counter()
                        cursor.execute("INSERT INTO T (ID, V) VALUES (?, ?)", (key, i))
                        written = time.perf_counter()
                        cursor.execute("SELECT ID, V FROM T WHERE ID = ?", (key,))
                        rows = cursor.fetchall()
                        done = time.perf_counter()
                        if i < 0:
                            continue
                        inserts.append(written - start)
                        pulls.append(done - written)
                        missed += rows != [(key, i)]
                pulls.sort()
                inserts.sort()
                print(
                    f"{args.rounds} rounds of INSERT then pull by the same DB-API connection, one "
                    f"idle node, {args.partitions} partitions:"
                )
                print(
                    f"  pull after INSERT: p50 {percentile(pulls, 50) * 1000:.1f} ms, p99 "
                    f"{percentile(pulls, 99) * 1000:.1f} ms, max {pulls[-1] * 1000:.1f} ms "
                    "(target p50 <= 30 ms)"
                )
                print(
                    f"  INSERT: p50 {percentile(inserts, 50) * 1000:.1f} ms, p99 "
                    f"{percentile(inserts, 99) * 1000:.1f} ms"
                )
                print(f"  pulls without their row: {missed} (must be 0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
