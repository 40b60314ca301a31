"""Nexmark on headwater: every query of `bench.nexmark.queries`, run, verified and timed.

Run ``python -m bench.nexmark [--events N] [--rate R] [--queries q0,q3,...]`` (defaults: 50,000
events at 5,000 events/s, all queries; about 8 minutes on 2 cores). It starts an in-memory
embedded broker and one ``headwater server`` with Spark started with it, then for each query in
turn, on topics of its own (2 partitions):

1. creates the three event streams and the query's persistent queries (``auto.offset.reset``
   earliest), and waits for them to run;
2. produces the Nexmark events of `bench.nexmark.generator` at ``--rate`` events/s, the event
   time of each being when it is produced (as Nexmark's generator does), and q13's side input
   before them;
3. reads the output topic until it holds exactly what `bench.nexmark.reference`'s plain-Python
   model of the query says (or nothing changes for ``--settle`` seconds): verified, or the rows
   missing and unexpected.

The output is read while the events are produced. It prints per query: run or refused (and why),
verified, and, in steady state (from the query's first output on, as issue 30 measures): events per
CPU second of the server's process tree (its events/s per core) and produce -> output latency
p50/p99 (an output record's arrival here less its timestamp, which is the latest event time it was
computed from, and an event's time is when it was produced). Then the count of queries run and
verified beside issue 30's target (>= 18 of 23; ksqlDB runs 11).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import orjson
from confluent_kafka import Consumer, TopicPartition

from bench._processes import cpu_seconds
from bench._server import BenchServer, bench_node
from bench.nexmark.generator import TOPICS, Bid, Event, GeneratorConfig, events, record
from bench.nexmark.queries import BY_NAME, QUERIES, NexmarkQuery
from bench.nexmark.reference import Canonical, Run, actual, difference, expected, side_input
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client, consumer, create_topic, producer

PARTITIONS = 2
TARGET = 18


@dataclass(frozen=True)
class Outcome:
    """One query's figures."""

    name: str
    refused: str | None = None
    verified: bool = False
    why: str = ""
    events_per_cpu_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    steady_events: int = 0  # events produced after the first output (the figures' span)
    first_output_s: float = 0.0  # from the first event produced to the first output
    caught_up_s: float = 0.0  # from the last event produced to the output verified


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rate", type=int, default=5_000, help="events per second produced")
    parser.add_argument("--queries", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--settle", type=float, default=120.0, help="seconds without new output, once produced"
    )
    options = parser.parse_args(argv)
    wanted = {n.strip() for n in options.queries.split(",") if n.strip()}
    chosen = [q for q in QUERIES if not wanted or q.name in wanted]
    outcomes: list[Outcome] = []
    with bench_node(("--set", "headwater.engine.start=startup")) as (broker, server):
        server.wait_for_spark(time.monotonic())
        # a throwaway run first, so that the first query measured is not Spark's first job
        warm = argparse.Namespace(**{**vars(options), "events": 2_000})
        _run(broker, server, BY_NAME["q2"], 99, warm)
        for index, query in enumerate(chosen):
            if query.refused is not None:
                outcomes.append(Outcome(query.name, refused=query.refused))
            else:
                outcomes.append(_run(broker, server, query, index, options))
            _print(outcomes[-1])
    _summary(outcomes, len(chosen))
    return 0


def _run(
    broker: EmbeddedBroker,
    server: BenchServer,
    query: NexmarkQuery,
    index: int,
    options: argparse.Namespace,
) -> Outcome:
    prefix = f"NX{index}_{uuid.uuid4().hex[:4].upper()}_"
    admin = admin_client(broker.settings())
    for kind in (*TOPICS, "side"):
        create_topic(admin, broker.settings(), f"{prefix}{kind}", PARTITIONS)
    ids: list[str] = []
    try:
        for statement in query.sql(prefix):
            for entity in server.ksql(statement, {"auto.offset.reset": "earliest"}):
                found = (entity.get("commandStatus") or {}).get("queryId")
                if found:
                    ids.append(found)
    except SystemExit as refused:
        return Outcome(query.name, why=f"refused: {str(refused).splitlines()[-1]}")
    _wait_running(server, ids)
    sink = f"{prefix}OUT"
    described = server.ksql(f"DESCRIBE {sink};")[0]["sourceDescription"]
    reader = consumer(broker.settings(), f"nexmark-{prefix}", fetch_wait_max_ms=20)
    reader.assign([TopicPartition(described["topic"], p, 0) for p in range(PARTITIONS)])
    production = _Production(broker, prefix, query, options)
    production.start()
    try:
        follower = _Follower(reader, query, server.process.pid)
        verdict = follower.follow(production, options.settle)
    finally:
        production.join()
        reader.close()
        server.ksql("TERMINATE ALL;")
    return follower.outcome(production, verdict)


def _wait_running(server: BenchServer, ids: list[str], timeout_s: float = 60) -> None:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        statuses = httpx.get(f"{server.url}/queryStatus", timeout=5).json()["queries"]
        if all((statuses.get(i) or {}).get("state") == "RUNNING" for i in ids):
            return
        time.sleep(0.2)
    print(f"  (queries {ids} not all RUNNING after {timeout_s:g} s: producing anyway)")


class _Production(threading.Thread):
    """Produces the run's events at ``options.rate`` in a thread of its own, each event's time
    being when it is produced (q13's side input first)."""

    def __init__(
        self,
        broker: EmbeddedBroker,
        prefix: str,
        query: NexmarkQuery,
        options: argparse.Namespace,
    ) -> None:
        super().__init__(daemon=True)
        self.broker, self.prefix, self.query, self.options = broker, prefix, query, options
        self.happened: list[Event] = []
        self.arrivals: list[int] = []  # each bid's record timestamp, for q12
        self.done = threading.Event()
        self.began_ms = 0.0  # when the first event was produced
        self.ended_ms = 0.0  # when the last one was

    def run(self) -> None:
        try:
            self._produce()
        finally:
            self.done.set()

    def _produce(self) -> None:
        writer = producer(self.broker.settings(), f"nexmark-{self.prefix}")
        if self.query.side_input:
            for side_key, side_value in side_input():
                writer.produce(
                    f"{self.prefix}side", orjson.dumps({"V": side_value}), orjson.dumps(side_key)
                )
            writer.flush(60)
        # The events are made and encoded before the first is due, so that producing them is
        # all this thread does while they are due: an event's time is when it is produced.
        lead_s = 1 + self.options.events / 20_000
        self.began_ms = time.time() * 1000 + lead_s * 1000
        config = GeneratorConfig(
            events=self.options.events,
            rate_per_s=self.options.rate,
            base_time_ms=int(self.began_ms),
            seed=zlib.crc32(self.prefix.encode()),
        )
        made = [(event, record(event)) for event in events(config)]
        for event, (kind, key, value) in made:
            ahead = (event.date_time - time.time() * 1000) / 1000
            if ahead > 0:
                time.sleep(ahead)
            stamp = int(time.time() * 1000)
            while True:
                try:
                    writer.produce(f"{self.prefix}{kind}", value, key, timestamp=stamp)
                    break
                except BufferError:
                    writer.poll(0.05)
            writer.poll(0)
            self.happened.append(event)
            if isinstance(event, Bid):
                self.arrivals.append(stamp)
        writer.flush(120)
        self.ended_ms = time.time() * 1000

    def run_of(self) -> Run:
        return Run(self.happened, self.arrivals)


class _Follower:
    """Reads a query's output while the events are produced; its figures count from the first
    output on (steady state)."""

    def __init__(self, reader: Consumer, query: NexmarkQuery, server_pid: int) -> None:
        self.reader, self.query, self.server_pid = reader, query, server_pid
        self.records: list[tuple[bytes | None, bytes | None]] = []
        self.seen: list[tuple[float, int]] = []  # (arrival here, record timestamp), ms
        self.first: tuple[float, float] | None = None  # (arrival ms, server CPU s) of the first
        self.last_cpu = 0.0
        self.verified_ms = 0.0

    def follow(self, production: _Production, settle_s: float) -> str:
        """Reads until the output is what the model says ("" then), or until nothing has come
        for ``settle_s`` seconds after the last event was produced (then how it differs)."""
        want: Counter[Canonical] | None = None
        last_change = time.monotonic()
        checked = -1
        while True:
            batch = self.reader.consume(10_000, 0.2)
            now_ms = time.time() * 1000
            for message in batch:
                if message.error() is not None:
                    continue
                self.records.append((message.key(), message.value()))
                self.seen.append((now_ms, message.timestamp()[1]))
            if batch:
                last_change = time.monotonic()
                if self.first is None:
                    self.first = (now_ms, cpu_seconds(self.server_pid))
            if not production.done.is_set():
                continue
            run = production.run_of()
            if want is None:
                want = expected(self.query.name, run)
                last_change = max(last_change, time.monotonic())
            if len(self.records) != checked and not batch:
                checked = len(self.records)
                if actual(self.query.name, self.query.kind, self.records, run) == want:
                    self.last_cpu = cpu_seconds(self.server_pid)
                    self.verified_ms = time.time() * 1000
                    return ""
            if time.monotonic() - last_change > settle_s:
                got = actual(self.query.name, self.query.kind, self.records, run)
                return difference(want, got) or "no output"

    def outcome(self, production: _Production, verdict: str) -> Outcome:
        run = production.run_of()
        if self.first is None:
            return Outcome(self.query.name, why=verdict or "no output")
        first_ms, first_cpu = self.first
        steady = sorted(now - stamp for now, stamp in self.seen if stamp >= first_ms)
        events_after = sum(1 for e in run.events if e.date_time >= first_ms)
        cpu = self.last_cpu - first_cpu
        return Outcome(
            self.query.name,
            verified=not verdict,
            why=verdict,
            events_per_cpu_s=events_after / cpu if cpu > 0 and not verdict else 0.0,
            p50_ms=statistics.median(steady) if steady else 0.0,
            p99_ms=steady[int(len(steady) * 0.99) - 1] if steady else 0.0,
            steady_events=events_after,
            first_output_s=(first_ms - production.began_ms) / 1000,
            caught_up_s=(self.verified_ms - production.ended_ms) / 1000 if not verdict else 0.0,
        )


def _print(outcome: Outcome) -> None:
    if outcome.refused is not None:
        print(f"{outcome.name:>4}: refused: {outcome.refused}", flush=True)
        return
    verdict = "verified" if outcome.verified else "NOT VERIFIED"
    print(
        f"{outcome.name:>4}: runs, {verdict}; first output {outcome.first_output_s:.1f} s after "
        f"the first event, verified {outcome.caught_up_s:.1f} s after the last; steady "
        f"(the {outcome.steady_events:,} events after the first output): "
        f"{outcome.events_per_cpu_s:,.0f} events per CPU s, produce -> output p50 "
        f"{outcome.p50_ms:,.0f} ms / p99 {outcome.p99_ms:,.0f} ms",
        flush=True,
    )
    if outcome.why:
        print("      " + outcome.why.replace("\n", "\n      "), flush=True)


def _summary(outcomes: list[Outcome], chosen: int) -> None:
    runs = sum(1 for o in outcomes if o.refused is None and not o.why.startswith("refused"))
    verified = sum(1 for o in outcomes if o.verified)
    print(
        f"Nexmark: {runs} of {chosen} queries run, {verified} verified "
        f"(target >= {TARGET} of 23 run and verified: {'met' if verified >= TARGET else 'NOT MET'})"
    )


if __name__ == "__main__":
    sys.exit(main())
