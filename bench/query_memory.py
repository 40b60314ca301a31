"""What persistent queries cost a node, and what TERMINATE ALL gives back: RSS, processes, latency.

Run ``python -m bench.query_memory`` (about 5 minutes). It starts an in-memory embedded broker and
one ``headwater server`` on it, declares a stream on 2 partitions, then adds simple CSAS queries
(``SELECT id, v + n FROM src``) in steps (``--steps 1,5,10,20``) and after each step prints, for the
server's whole process tree (server, Spark child, JVM, Python workers):

- how many queries report RUNNING, and the time from one record produced to its copy on every sink;
- RSS in MB and the processes by kind (the JVM, Spark's Python workers, ...);
- the CPU share of the idle tree over 10 s.

Then ``TERMINATE ALL`` and the same figures once the server reports no query left, and again after
``--settle`` seconds: what the queries held and did not give back. Finally one query more than
``ksql.query.persistent.active.limit`` (set to the last step) is submitted and its refusal printed.
Everything it starts (broker, server and the server's children) is stopped on exit, by process id.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
import uuid
from pathlib import Path

import httpx
from confluent_kafka import TopicPartition

from bench._processes import cpu_of, process_tree, processes_by_kind, pss_mb, rss_mb
from bench._server import bench_node
from headwater.kafka.clients import consumer, producer


def _statuses(url: str) -> dict[str, dict[str, object]]:
    answer = httpx.get(f"{url}/queryStatus", timeout=30)
    found: dict[str, dict[str, object]] = answer.json().get("queries", {})
    return found


def _wait_running(url: str, want: int, timeout_s: float) -> tuple[int, float]:
    """(queries RUNNING, seconds) once ``want`` are RUNNING or ``timeout_s`` passed."""
    started = time.monotonic()
    running = 0
    while time.monotonic() - started < timeout_s:
        try:
            states = [s.get("state") for s in _statuses(url).values()]
        except httpx.HTTPError:
            states = []
        running = sum(1 for s in states if s == "RUNNING")
        if running >= want:
            break
        time.sleep(0.5)
    return running, time.monotonic() - started


def _one_through(settings: object, sinks: list[str], key: bytes, timeout_s: float) -> float | None:
    """Produce one record to ``src`` with ``key``; seconds until it is on every sink (None: not in
    ``timeout_s``)."""
    reader = consumer(settings, f"bench-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=50)  # type: ignore[arg-type]
    reader.assign([TopicPartition(s, p, 0) for s in sinks for p in range(2)])
    writer = producer(settings, "bench-memory")  # type: ignore[arg-type]
    sent = time.monotonic()
    writer.produce("src", b'{"V": 1}', key)
    writer.flush(10)
    missing = set(sinks)
    try:
        while missing and time.monotonic() - sent < timeout_s:
            for message in reader.consume(1000, 0.1):
                if message.error() is None and message.key() == key:
                    missing.discard(message.topic() or "")
        return None if missing else time.monotonic() - sent
    finally:
        reader.close()


def _idle_share(root: int, seconds: float) -> float:
    """The tree's CPU share over ``seconds`` (processes that end meanwhile are left out)."""
    before, at = {pid: cpu_of(pid) for pid in process_tree(root)}, time.monotonic()
    time.sleep(seconds)
    used = sum(
        cpu_of(pid) - start for pid, start in before.items() if Path(f"/proc/{pid}").exists()
    )
    return max(0.0, used) / (time.monotonic() - at)


def _report(label: str, root: int, idle_s: float) -> None:
    share = _idle_share(root, idle_s)
    print(
        f"  {label}: RSS {rss_mb(root):,.0f} MB (PSS {pss_mb(root):,.0f} MB), CPU "
        f"{share * 100:.0f}% of a core idle, processes (RSS / PSS): {processes_by_kind(root)}",
        flush=True,
    )


def _kill_leftovers(pids: set[int]) -> None:
    """SIGKILL what is still alive of the processes the server had (by process id)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps", default="1,5,10,20", help="queries running after each step (ascending)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="seconds after TERMINATE ALL before the last figures",
    )
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the CPU sample")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="more server settings"
    )
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    from pyspark import __version__ as spark_version

    print(
        f"python {platform.python_version()}, pyspark {spark_version}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    extra = ["--set", f"ksql.query.persistent.active.limit={steps[-1]}"]
    for item in args.set:
        extra += ["--set", item]
    seen: set[int] = set()
    with bench_node(tuple(extra)) as (broker, server):
        try:
            _run(broker.settings(), server.url, server.process.pid, steps, args, seen)
        finally:
            seen.update(process_tree(server.process.pid))
    time.sleep(1)
    _kill_leftovers(seen)
    return 0


def _run(
    settings: object,
    url: str,
    root: int,
    steps: list[int],
    args: argparse.Namespace,
    seen: set[int],
) -> None:
    def ksql(sql: str, ok: bool = True) -> httpx.Response:
        answer = httpx.post(f"{url}/ksql", json={"ksql": sql}, timeout=120)
        if ok and answer.status_code != 200:
            raise SystemExit(f"{sql}\n-> {answer.status_code} {answer.text}")
        return answer

    ksql(
        "CREATE STREAM src (id STRING KEY, v INT) WITH (kafka_topic='src', partitions=2, "
        "value_format='JSON');"
    )
    _report("no query", root, args.idle)
    sinks: list[str] = []
    for want in steps:
        started = time.monotonic()
        while len(sinks) < want:
            n = len(sinks)
            ksql(f"CREATE STREAM m_{n} AS SELECT id, v + {n} AS w FROM src;")
            sinks.append(f"M_{n}")
        submitted = time.monotonic() - started
        running, took = _wait_running(url, want, 600)
        _one_through(settings, sinks, f"warm{want}".encode(), 300)  # new queries' first batch
        through = _one_through(settings, sinks, f"k{want}".encode(), 120)
        seen.update(process_tree(root))
        print(
            f"{want} queries (submitted in {submitted:.1f} s): {running} RUNNING after "
            f"{took:.0f} s; one record to every sink: "
            f"{'not within 120 s' if through is None else f'{through:.1f} s'}",
            flush=True,
        )
        _report(f"with {want}", root, args.idle)
    answer = ksql("CREATE STREAM m_over AS SELECT id, v FROM src;", ok=False)
    print(
        f"query {len(sinks) + 1} with ksql.query.persistent.active.limit={steps[-1]}: "
        f"{answer.status_code} {answer.json().get('message', answer.text)[:300]}",
        flush=True,
    )
    started = time.monotonic()
    ksql("TERMINATE ALL;")
    while time.monotonic() - started < 300 and _statuses(url):
        time.sleep(0.5)
    print(f"TERMINATE ALL: no query reported after {time.monotonic() - started:.1f} s", flush=True)
    _report("just after", root, args.idle)
    time.sleep(max(0.0, args.settle - args.idle))
    _report(f"{args.settle:.0f} s after", root, args.idle)


if __name__ == "__main__":
    sys.exit(main())
