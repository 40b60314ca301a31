"""Can one request stall a server? Full scans and the worst statements, against /info's latency.

Starts an in-memory embedded broker and a ``headwater server`` on it, loads a table of ``--rows``
rows (STRING key, three value columns) straight into its topic, then measures:

1. one full scan (``SELECT * FROM big;``) alone: seconds, rows/s, and the server's peak RSS;
2. ``--scans`` concurrent full scans while a probe asks ``GET /info`` every 20 ms: /info p50/p99/max;
3. the same probe while clients post the worst statements a body may carry (a 600 KB expression,
   a statement of 50,000 tokens, deep nesting, thousands of statements in one request): what each
   got back, and /info p50/p99/max meanwhile.

Issue 21's bar: /info answers within 100 ms p99 while the server chews on any of these. Run
``python -m bench.serving_stall [--rows 300000] [--scans 4]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import httpx

from tests.support.node import Server, ksql, percentile, produce_rows, versions, wait_visible

TABLE, TOPIC, PARTITIONS = "BIG", "big", 4


def _key(i: int) -> str:
    return f"k{i:08d}"


class InfoProbe:
    """Asks ``GET /info`` every ``interval_s`` in a thread until stopped; keeps the latencies."""

    def __init__(self, url: str, interval_s: float = 0.02) -> None:
        self.url, self.interval_s = url, interval_s
        self.seconds: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=30.0) as client:
            while not self._stop.is_set():
                start = time.perf_counter()
                try:
                    ok = client.get(f"{self.url}/info").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.seconds.append(time.perf_counter() - start)
                self.failures += not ok
                self._stop.wait(self.interval_s)

    def line(self) -> str:
        ms = sorted(s * 1000 for s in self.seconds)
        if not ms:
            return "/info: no sample"
        return (
            f"/info p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
            f"max {ms[-1]:.1f} ms over {len(ms)} requests, {self.failures} failed"
        )


def _rss_kb(pid: int) -> int:
    """The peak resident set (VmHWM) of a process, in KB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _scan(url: str) -> tuple[int, int, float]:
    """One full scan: (HTTP status, rows, seconds)."""
    start = time.perf_counter()
    with httpx.Client(timeout=600.0) as client:
        response = client.post(f"{url}/query", json={"ksql": f"SELECT * FROM {TABLE};"})
    seconds = time.perf_counter() - start
    rows = response.text.count('{"row"') if response.status_code == 200 else 0
    return response.status_code, rows, seconds


def _concurrently(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        results[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def worst_statements() -> dict[str, tuple[str, str]]:
    """The hostile requests: name -> (endpoint, statement text)."""
    terms = "+".join(["V"] * 200_000)
    return {
        "200,000-term expression": ("/query", f"SELECT {terms}+1 FROM {TABLE};"),
        "50,000 tokens": ("/query", "SELECT " + ", ".join(["V"] * 25_000) + f" FROM {TABLE};"),
        "nesting 5,000 deep": (
            "/query",
            "SELECT " + "(" * 5000 + "V" + ")" * 5000 + f" FROM {TABLE};",
        ),
        "5,000 statements": ("/ksql", "SHOW STREAMS;" * 5000),
    }


def _post(url: str, endpoint: str, text: str) -> tuple[int, str, float]:
    start = time.perf_counter()
    with httpx.Client(timeout=600.0) as client:
        response = client.post(f"{url}{endpoint}", json={"ksql": text})
    seconds = time.perf_counter() - start
    message = ""
    if response.status_code != 200:
        try:
            message = str(response.json().get("message", ""))[:90]
        except ValueError:
            message = response.text[:90]
    return response.status_code, message, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--scans", type=int, default=4, help="concurrent full scans")
    parser.add_argument("--repeat", type=int, default=2, help="posts of each worst statement")
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra argument for headwater server (repeatable), e.g. "
        "--server-arg=--set --server-arg=ksql.query.pull.table.scan.max.concurrent=1",
    )
    args = parser.parse_args()

    from headwater.kafka.broker import EmbeddedBroker

    print(versions("starlette", "granian", "uvloop", "orjson", "lmdb"))
    work = Path(tempfile.mkdtemp(prefix="bench-stall-"))
    with EmbeddedBroker(None, port=0) as broker, httpx.Client(timeout=60.0) as client:
        server = Server(
            [
                "-b",
                broker.bootstrap_servers,
                "--service-id",
                "stall",
                "--state-dir",
                str(work / "node"),
                *args.server_arg,
            ],
            work / "server.log",
        )
        with server:
            server.wait_healthy()
            ksql(
                client,
                server.url,
                f"CREATE TABLE {TABLE} (ID STRING PRIMARY KEY, V BIGINT, S STRING, D DOUBLE) WITH "
                f"(kafka_topic='{TOPIC}', partitions={PARTITIONS}, value_format='JSON');",
            )
            rows = (
                (_key(i), {"V": i, "S": f"name-{i % 977}", "D": i / 7}) for i in range(args.rows)
            )
            count, last, seconds = produce_rows(broker.settings(), TOPIC, rows)
            start = time.perf_counter()
            wait_visible(client, server.url, TABLE, last.values(), server=server, timeout_s=600)
            print(
                f"table {TABLE}: {count:,} rows over {PARTITIONS} partitions, produced in "
                f"{seconds:.1f} s, restored {time.perf_counter() - start:.1f} s later; "
                f"server RSS peak {_rss_kb(server.process.pid) / 1024:.0f} MB"
            )

            status, got, alone = _scan(server.url)
            print(
                f"one full scan: HTTP {status}, {got:,} rows in {alone:.2f} s "
                f"({got / alone:,.0f} rows/s); server RSS peak {_rss_kb(server.process.pid) / 1024:.0f} MB"
            )

            with InfoProbe(server.url) as probe:
                results = _concurrently(args.scans, lambda _i: _scan(server.url))
            statuses = ", ".join(f"{s} ({r:,} rows, {t:.1f} s)" for s, r, t in results)
            print(f"{args.scans} concurrent full scans: {statuses}")
            print(
                f"  meanwhile {probe.line()}; server RSS peak "
                f"{_rss_kb(server.process.pid) / 1024:.0f} MB"
            )

            for name, (endpoint, text) in worst_statements().items():
                with InfoProbe(server.url) as probe:
                    answers = _concurrently(
                        args.repeat, lambda _i, e=endpoint, t=text: _post(server.url, e, t)
                    )
                took = statistics.mean(t for _s, _m, t in answers)
                status, message, _ = answers[0]
                print(
                    f"{args.repeat} x {name} ({len(text) / 1000:,.0f} KB) to {endpoint}: HTTP "
                    f"{status} in {took:.2f} s {message!r}"
                )
                print(f"  meanwhile {probe.line()}")
            server.check()


if __name__ == "__main__":
    main()
