"""What one micro-batch costs a persistent query, beside what its records cost.

Run ``python -m bench.batch_overhead`` (about 2 minutes). It starts an in-memory embedded broker and
one ``headwater server`` on it, runs one stateless CSAS (``SELECT id, v + 1 AS w FROM src``, 2
partitions; ``--workload count``: a CTAS, ``SELECT id, COUNT(*) ... GROUP BY id``) and produces
records at a steady rate (``--rate``, default 2,500 records/s: far below what the query can take,
so Spark runs many small micro-batches, as it does for most live streams). After ``--warm`` seconds (the JVM's JIT compiles meanwhile) it measures ``--windows``
windows of ``--seconds`` each and prints, per window:

- micro-batches run (the query's status), records produced;
- CPU seconds of each kind of process of the server's tree (the JVM, Spark's Python workers, the
  source runner, the Spark child that runs the sink, the server), and per micro-batch;
- processes forked on the machine per micro-batch (``/proc/stat``: the JVM's helpers, such as
  Hadoop's ``readlink`` and ``chmod`` without its native library);
- CPU seconds per 1k records of the whole tree.

Targets: none of its own; the figures are issue 30's profile at a rate where Spark's per-batch costs,
not the records, decide the CPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import Counter

import httpx

from bench._processes import cpu_of, process_kind, process_tree
from bench._server import bench_node
from bench.query_memory import _one_through, _wait_running
from headwater.kafka.clients import producer


def _forks() -> int:
    """Processes forked on this machine since boot (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        for line in stat:
            if line.startswith("processes"):
                return int(line.split()[1])
    return 0


def _cpu_by_kind(root: int) -> dict[int, tuple[str, float]]:
    return {pid: (process_kind(pid), cpu_of(pid)) for pid in process_tree(root)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=2500, help="records per second produced")
    parser.add_argument("--warm", type=float, default=40.0, help="seconds before measuring")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of one window")
    parser.add_argument("--windows", type=int, default=2)
    parser.add_argument(
        "--workload",
        choices=["filter", "count"],
        default="filter",
        help="the stateless CSAS (default) or a CTAS counting per key (a stateful query)",
    )
    args = parser.parse_args(argv)
    from pyspark import __version__ as spark_version

    print(
        f"python {platform.python_version()}, pyspark {spark_version}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}; {args.workload}, {args.rate:,} records/s",
        flush=True,
    )
    with bench_node() as (broker, server):
        url = server.url
        for sql in (
            (
                "CREATE STREAM src (id STRING KEY, v INT) WITH (kafka_topic='src', partitions=2, "
                "value_format='JSON');"
            ),
            (
                "CREATE STREAM m_0 AS SELECT id, v + 1 AS w FROM src;"
                if args.workload == "filter"
                else "CREATE TABLE m_0 AS SELECT id, COUNT(*) AS n FROM src GROUP BY id;"
            ),
        ):
            answer = httpx.post(f"{url}/ksql", json={"ksql": sql}, timeout=120)
            if answer.status_code != 200:
                raise SystemExit(f"{sql}\n-> {answer.status_code} {answer.text}")
        _wait_running(url, 1, 600)
        if _one_through(broker.settings(), ["M_0"], b"warm", 300) is None:
            raise SystemExit("the query gave no output within 300 s")
        writer = producer(broker.settings(), "bench-batches")
        sent = 0

        def load(seconds: float) -> int:
            nonlocal sent
            started, count, step = time.monotonic(), 0, max(1, args.rate // 50)
            while (elapsed := time.monotonic() - started) < seconds:
                while count < elapsed * args.rate:
                    for _ in range(step):
                        writer.produce("src", b'{"V": 1}', f"k{sent}".encode())
                        sent += 1
                        count += 1
                    writer.poll(0)
                time.sleep(0.02)
            writer.flush(10)
            return count

        def batches() -> int:
            found = httpx.get(f"{url}/queryStatus", timeout=30).json()["queries"]
            return sum(int(q.get("batches", 0)) for q in found.values())

        load(args.warm)
        root = server.process.pid
        for window in range(1, args.windows + 1):
            before, forks, ran = _cpu_by_kind(root), _forks(), batches()
            records = load(args.seconds)
            time.sleep(2)  # the last batch of the window
            after, forks, ran = _cpu_by_kind(root), _forks() - forks, batches() - ran
            by_kind: Counter[str] = Counter()
            for pid, (kind, cpu) in after.items():
                by_kind[kind] += cpu - before.get(pid, (kind, 0.0))[1]
            total = sum(by_kind.values())
            per_batch = ", ".join(
                f"{kind} {cpu:.1f} s ({cpu / max(ran, 1) * 1000:.0f} ms)"
                for kind, cpu in by_kind.most_common()
                if cpu >= 0.05
            )
            print(
                f"window {window}: {ran} micro-batches, {records:,} records; CPU (per batch): "
                f"{per_batch}; {forks / max(ran, 1):.1f} processes forked per batch; "
                f"{total / max(records, 1) * 1000:.3f} CPU s per 1k records, "
                f"{total / max(ran, 1) * 1000:.0f} ms per batch",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
