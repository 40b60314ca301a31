"""Hostile soak: one node with persistent queries under poison records, DDL churn, bad push clients
and a burst of queries past the limit (issue 28).

Starts an in-memory embedded broker in this process and one ``headwater server`` on it (a free
127.0.0.1 port, ``ksql.query.persistent.active.limit`` = --limit), creates a source stream ``SRC``
(JSON values) with one CSAS (``WHERE ID >= 0``, a projection) and one CTAS (``COUNT(*)`` per key)
over it, both from the earliest offset, then for --minutes, each in its own thread:

- a producer writes numbered good records (unique ids; plain, with escaped NULs, unicode, and a
  1.2 MB one every --huge-every-s) at --rate, interleaved straight into the topic with poison
  records of every kind (``tests/support/abuse_check.py``: 5,000-deep nesting, 1.2 MB of garbage, invalid
  UTF-8, raw NUL bytes, wrong types, tombstones, empty values, non-JSON, truncated JSON);
- CREATE STREAM / CSAS / TERMINATE / DROP ... DELETE TOPIC cycles on other names (--cycles);
- push queries over ``/query-stream`` whose clients never read (--stuck of them, open to the end)
  or vanish mid-stream (a reset, --vanishing of them);
- once, a burst of CSAS past the active-query limit, sent at once (each answer must be a 200 or a
  clean 400 naming the limit), then terminated and dropped with their topics;
- ``GET /info`` polled continuously (its latency), ``/queryStatus`` and ``SHOW QUERIES`` every
  second (queries seen in ERROR, most queries active), the memory of the server's process tree (the
  server, Spark's JVM and Python workers) every second: PSS summed, as VmRSS summed counts the pages
  a forked process shares again (a JVM forking to start a Python worker showed as 4 JVMs, 3.8 GB).

Then the CSAS output topic is read whole (offsets from fetches) and every good id must be there
exactly once, and the CTAS counts (a pull query) must equal the good records per key. The report is
a table of figure / target / met; exit status 1 when a target is missed.

Everything started is stopped on exit, Ctrl-C, SIGTERM or an error (by process id), and any
process the server started that outlived it (Spark's JVM or a Python worker) is killed and counted.

Run from the repository root: ``python -m bench.abuse --minutes 5 [--seed N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from bench._processes import process_tree, processes_by_kind, rss_kb, rss_mb
from bench.chaos import kill_leftovers
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings, admin_client, consumer, producer_config
from tests.support.abuse_check import (
    POISON_KINDS,
    by_a_record,
    classify_burst,
    count_mismatches,
    good_value,
    key_of,
    latency_ms,
    poison,
    verdicts,
)
from tests.support.chaos_check import check_output
from tests.support.node import Server, versions

LIMIT_SETTING = "ksql.query.persistent.active.limit"


def _persistent(queries: list[dict[str, Any]]) -> int:
    """How many of SHOW QUERIES' queries count against the limit: the persistent ones (it also
    lists the push queries of the server asked, as ksqlDB does)."""
    return sum(1 for q in queries if q.get("queryType", "PERSISTENT") == "PERSISTENT")


SOURCE_TOPIC, OUTPUT_TOPIC, COUNTS_TOPIC = "abuse_src", "abuse_good", "abuse_counts"
PARTITIONS = 2
EARLIEST = {"auto.offset.reset": "earliest"}
SETUP = (
    (
        f"CREATE STREAM SRC (K STRING KEY, ID BIGINT, PAD STRING) WITH (kafka_topic='{SOURCE_TOPIC}', "
        f"partitions={PARTITIONS}, value_format='JSON');"
    ),
    (
        f"CREATE STREAM GOOD WITH (kafka_topic='{OUTPUT_TOPIC}') AS SELECT K, ID FROM SRC "
        "WHERE ID >= 0 EMIT CHANGES;"
    ),
    (
        f"CREATE TABLE COUNTS WITH (kafka_topic='{COUNTS_TOPIC}') AS SELECT K, COUNT(*) AS N FROM SRC "
        "GROUP BY K EMIT CHANGES;"
    ),
)
TIMEOUT_S = 60.0


class Run:
    """The load's threads and what they saw."""

    def __init__(self, server: Server, settings: KafkaSettings, args: argparse.Namespace) -> None:
        self.server, self.settings, self.args = server, settings, args
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.minutes * 60
        self.stop = threading.Event()
        self.lock = threading.RLock()  # note() is called with it held
        self.good_ids: list[int] = []  # delivered
        self.good_kinds: Counter[str] = Counter()
        self.poison: Counter[str] = Counter()  # delivered, by kind
        self.produce_failures: list[str] = []
        self.info_s: list[float] = []
        self.info_errors: Counter[str] = Counter()
        self.errored: dict[str, str] = {}  # query id -> the first ERROR message seen
        self.in_error: set[str] = set()  # queries in ERROR at the last look
        self.max_active = 0
        self.rss_peak_mb = 0.0
        self.rss_peak_at = 0.0
        self.rss_samples: list[float] = []
        self.rss_peak_processes = ""  # the tree's processes by kind at the peak
        self.rss_timeline: list[str] = []  # every 30 s
        self.server_rss_peak_mb = 0.0
        self.rss_sum_peak_mb = 0.0  # plain VmRSS summed: counts a forked JVM's shared pages again  # the server's own process (push queries live there)
        self.cycles = 0
        self.cycle_failures: list[str] = []
        self.cycle_refused = 0  # CSAS of a cycle refused by the limit (during the burst)
        self.burst: Counter[str] = Counter()
        self.burst_examples: list[str] = []
        self.push: Counter[str] = Counter()
        self.server_exits = 0
        self.events: list[str] = []
        self._stuck: list[socket.socket] = []
        self._threads = [
            threading.Thread(target=self._guard, args=(target,), daemon=True)
            for target in (
                self._produce,
                self._cycle,
                self._push_vanishing,
                self._push_stuck,
                self._burst,
                self._poll_info,
                self._watch_queries,
                self._sample_rss,
            )
        ]

    def note(self, text: str) -> None:
        with self.lock:
            self.events.append(f"t={time.monotonic() - self.t0:.1f} s {text}")

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait(self) -> None:
        """Until the time is up or the server exited."""
        while time.monotonic() < self.deadline and not self.stop.is_set():
            if self.server.process.poll() is not None:
                self.server_exits += 1
                self.note(
                    f"the server exited (status {self.server.process.returncode}):\n"
                    f"{self.server.log_tail(30)}"
                )
                break
            self.stop.wait(0.5)

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(TIMEOUT_S + 10)
        for sock in self._stuck:
            sock.close()

    def _guard(self, target: Any) -> None:
        try:
            target()
        except Exception as exc:  # noqa: BLE001  (a thread's failure is a finding, not a crash)
            self.note(f"{target.__name__} failed: {exc!r}")

    def _running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    # -- the producer -------------------------------------------------------------------------------

    def _produce(self) -> None:
        args = self.args
        config = producer_config(self.settings, "abuse")
        config.update({"linger.ms": 5, "message.max.bytes": 4_000_000})
        sender = Producer(config)
        chooser = random.Random(args.seed)
        next_id, poison_n, huge_at = 0, 0, time.monotonic()

        def delivered(kind: str, good_id: int | None) -> Any:
            def callback(error: Any, _message: Any) -> None:
                with self.lock:
                    if error is not None:
                        self.produce_failures.append(f"{kind}: {error}")
                    elif good_id is not None:
                        self.good_ids.append(good_id)
                        self.good_kinds[kind] += 1
                    else:
                        self.poison[kind] += 1

            return callback

        small = [k for k in POISON_KINDS if k not in ("huge-garbage", "deep-nesting")]
        next_at = time.monotonic()
        while self._running():
            good_kind = chooser.choice(("plain", "plain", "escaped-nul", "unicode"))
            kinds: list[str] = []
            if time.monotonic() >= huge_at:
                good_kind, kinds = "huge", ["huge-garbage", "deep-nesting"]
                huge_at = time.monotonic() + args.huge_every_s
            if next_id % args.poison_every == 0:
                kinds.append(small[poison_n % len(small)])
            send(
                sender,
                key_of(next_id, args.keys).encode(),
                good_value(next_id, good_kind),
                delivered(good_kind, next_id),
            )
            next_id += 1
            for kind in kinds:
                key, value = poison(kind, poison_n, args.keys)
                send(sender, key, value, delivered(kind, None))
                poison_n += 1
            sender.poll(0)
            next_at = max(next_at + 1 / args.rate, time.monotonic() - 1)
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        left = sender.flush(60)
        if left:
            self.produce_failures.append(f"{left} records undelivered at the end")

    # -- DDL cycles ---------------------------------------------------------------------------------

    def _ksql(self, client: httpx.Client, sql: str) -> tuple[int, Any]:
        try:
            response = client.post(
                f"{self.server.url}/ksql", json={"ksql": sql, "streamsProperties": EARLIEST}
            )
            try:
                return response.status_code, response.json()
            except ValueError:
                return response.status_code, response.text[:300]
        except httpx.HTTPError as exc:
            return 0, repr(exc)

    def _cycle(self) -> None:
        """CREATE STREAM, INSERT, CSAS, TERMINATE, DROP ... DELETE TOPIC (both), again and again."""
        chooser = random.Random(self.args.seed + 1)
        with httpx.Client(timeout=TIMEOUT_S) as client:
            for i in range(self.args.cycles):
                if not self._running():
                    return
                name = f"C{i}"
                steps = [
                    (
                        f"CREATE STREAM {name} (K STRING KEY, ID BIGINT) WITH (kafka_topic="
                        f"'abuse_c{i}', partitions=1, value_format='JSON');"
                    ),
                    f"INSERT INTO {name} (K, ID) VALUES ('a', {i});",
                    (
                        f"CREATE STREAM {name}_OUT WITH (kafka_topic='abuse_c{i}_out') AS SELECT * "
                        f"FROM {name} EMIT CHANGES;"
                    ),
                ]
                query_id = None
                for sql in steps:
                    status, body = self._ksql(client, sql)
                    if status == 200:
                        query_id = query_id or _query_id(body)
                    elif "_OUT" in sql and classify_burst(status, body, LIMIT_SETTING) == "refused":
                        with self.lock:
                            self.cycle_refused += 1
                    else:
                        self._cycle_failed(sql, status, body)
                self.stop.wait(chooser.uniform(2, 8))  # the query runs (or is still starting)
                ends = ([f"TERMINATE {query_id};"] if query_id else []) + [
                    f"DROP STREAM IF EXISTS {name}_OUT DELETE TOPIC;",
                    f"DROP STREAM {name} DELETE TOPIC;",
                ]
                for sql in ends:
                    status, body = self._ksql(client, sql)
                    if status != 200:
                        self._cycle_failed(sql, status, body)
                with self.lock:
                    self.cycles += 1

    def _cycle_failed(self, sql: str, status: int, body: Any) -> None:
        with self.lock:
            self.cycle_failures.append(
                f"t={time.monotonic() - self.t0:.0f} s {sql} -> {status}: {str(body)[:300]}"
            )

    # -- the burst past the limit -------------------------------------------------------------------

    def _burst(self) -> None:
        """Once, at 35% of the run: as many CSAS at once as fill the free slots and --burst-extra
        more; then they run a while, are terminated and dropped with their topics."""
        at = self.t0 + 0.35 * self.args.minutes * 60
        self.stop.wait(max(0.0, at - time.monotonic()))
        if not self._running():
            return
        with httpx.Client(timeout=TIMEOUT_S) as client:
            status, body = self._ksql(client, "SHOW QUERIES;")
            active = _persistent(body[0]["queries"]) if status == 200 else 0
            count = max(0, self.args.limit - active) + self.args.burst_extra
            self.note(f"burst of {count} CSAS ({active} queries active, limit {self.args.limit})")
            answers: list[tuple[int, Any]] = [(0, None)] * count

            def send(i: int) -> None:
                with httpx.Client(timeout=TIMEOUT_S) as own:
                    answers[i] = self._ksql(
                        own,
                        f"CREATE STREAM B{i} WITH (kafka_topic='abuse_b{i}') "
                        f"AS SELECT K, ID FROM SRC WHERE ID % 2 = 0 "
                        f"EMIT CHANGES;",
                    )

            senders = [threading.Thread(target=send, args=(i,)) for i in range(count)]
            for thread in senders:
                thread.start()
            for thread in senders:
                thread.join()
            accepted = []
            for i, (status, body) in enumerate(answers):
                verdict = classify_burst(status, body, LIMIT_SETTING)
                with self.lock:
                    self.burst[verdict] += 1
                    if verdict != "accepted" and len(self.burst_examples) < 3:
                        self.burst_examples.append(f"{status}: {str(body)[:300]}")
                if verdict == "accepted":
                    accepted.append((i, _query_id(body)))
            self.stop.wait(20)  # they run beside the rest
            for i, query_id in accepted:
                for sql in ([f"TERMINATE {query_id};"] if query_id else []) + [
                    f"DROP STREAM B{i} DELETE TOPIC;"
                ]:
                    status, body = self._ksql(client, sql)
                    if status != 200:
                        self._cycle_failed(sql, status, body)
            self.note(f"burst: {dict(self.burst)}; the accepted ones terminated and dropped")

    # -- push clients -------------------------------------------------------------------------------

    def _push_request(self, earliest: bool) -> socket.socket:
        body = json.dumps(
            {"sql": "SELECT * FROM SRC EMIT CHANGES;", "properties": EARLIEST if earliest else {}}
        ).encode()
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(
            b"POST /query-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nAccept: application/vnd.ksqlapi.delimited.v1\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        return sock

    def _push_stuck(self) -> None:
        """Clients that start a push query from the beginning and never read a byte (kept open)."""
        for i in range(self.args.stuck):
            if not self._running():
                return
            try:
                self._stuck.append(self._push_request(earliest=True))
                with self.lock:
                    self.push["never read"] += 1
            except OSError as exc:
                with self.lock:
                    self.push[f"never read: {type(exc).__name__}"] += 1
            self.stop.wait(self.args.minutes * 60 / max(1, self.args.stuck) / 2)

    def _push_vanishing(self) -> None:
        """Clients that read a little of a push query and vanish (a TCP reset), or vanish before
        reading anything."""
        chooser = random.Random(self.args.seed + 2)
        pause = self.args.minutes * 60 / max(1, self.args.vanishing)
        for i in range(self.args.vanishing):
            if not self._running():
                return
            kind = "vanished"
            try:
                sock = self._push_request(earliest=chooser.random() < 0.5)
                if i % 3:
                    sock.settimeout(5)
                    got = sock.recv(chooser.randrange(100, 20_000))
                    kind = (
                        "vanished after reading"
                        if got.startswith(b"HTTP/1.1 200")
                        else f"vanished after {got[:40]!r}"
                    )
                else:
                    kind = "vanished before reading"
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            except OSError as exc:
                kind = f"vanishing client: {type(exc).__name__}"
            with self.lock:
                self.push[kind] += 1
            self.stop.wait(chooser.uniform(0.5, 1.5) * pause)

    # -- watchers -----------------------------------------------------------------------------------

    def _poll_info(self) -> None:
        with httpx.Client(timeout=10) as client:
            while self._running():
                sent = time.perf_counter()
                try:
                    status = client.get(f"{self.server.url}/info").status_code
                    error = "" if status == 200 else str(status)
                except httpx.HTTPError as exc:
                    error = type(exc).__name__
                with self.lock:
                    self.info_s.append(time.perf_counter() - sent)
                    if error:
                        self.info_errors[error] += 1
                self.stop.wait(0.1)

    def _watch_queries(self) -> None:
        with httpx.Client(timeout=TIMEOUT_S) as client:
            while self._running():
                self.check_queries(client)
                self.stop.wait(1.0)

    def check_queries(self, client: httpx.Client) -> None:
        """Note queries in ERROR (/queryStatus) and how many the catalog holds (SHOW QUERIES)."""
        try:
            statuses = client.get(f"{self.server.url}/queryStatus").json().get("queries", {})
            status, body = self._ksql(client, "SHOW QUERIES;")
        except (httpx.HTTPError, ValueError):
            return
        with self.lock:
            self.in_error = {q for q, info in statuses.items() if info.get("state") == "ERROR"}
            for query_id, info in statuses.items():
                if info.get("state") == "ERROR" and query_id not in self.errored:
                    self.errored[query_id] = str(info.get("message") or info.get("lastError"))[:300]
                    self.note(f"{query_id} in ERROR: {self.errored[query_id]}")
            if status == 200:
                self.max_active = max(self.max_active, _persistent(body[0]["queries"]))

    def _sample_rss(self) -> None:
        while self._running():
            mb = pss_mb(self.server.process.pid)
            rss = rss_mb(self.server.process.pid)
            own = rss_kb(self.server.process.pid) / 1024
            with self.lock:
                self.rss_sum_peak_mb = max(self.rss_sum_peak_mb, rss)
                self.server_rss_peak_mb = max(self.server_rss_peak_mb, own)
                self.rss_samples.append(mb)
                if mb > self.rss_peak_mb:
                    self.rss_peak_mb, self.rss_peak_at = mb, time.monotonic() - self.t0
                    self.rss_peak_processes = processes_by_kind(self.server.process.pid)
                if len(self.rss_samples) % 30 == 1:
                    self.rss_timeline.append(
                        f"t={time.monotonic() - self.t0:.0f} s PSS {mb:,.0f} MB "
                        f"(VmRSS by kind: {processes_by_kind(self.server.process.pid)})"
                    )
            self.stop.wait(1.0)


def pss_mb(root: int) -> float:
    """The memory of ``root``'s process tree in MB: the sum of each process's PSS (shared pages
    divided among the processes sharing them), so that a JVM forking to start a Python worker (a
    momentary copy whose VmRSS repeats the JVM's ~1 GB) or Spark's forked daemons are not counted
    twice; VmRSS where PSS cannot be read."""
    total = 0
    for pid in process_tree(root):
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
            key = "Pss:"
        except OSError:
            try:
                text, key = Path(f"/proc/{pid}/status").read_text(), "VmRSS:"
            except OSError:
                continue
        for line in text.splitlines():
            if line.startswith(key):
                total += int(line.split()[1])
                break
    return total / 1024


def send(sender: Producer, key: bytes, value: bytes | None, callback: Any) -> None:
    """Produce one record to the source topic, waiting while the producer's queue is full."""
    while True:
        try:
            sender.produce(SOURCE_TOPIC, key=key, value=value, on_delivery=callback)
            return
        except BufferError:
            sender.poll(0.05)


def _query_id(body: Any) -> str | None:
    """The query id in a CREATE ... AS SELECT's answer."""
    text = json.dumps(body)
    found = re.search(r'"queryId": "([A-Za-z0-9_]+)"', text) or re.search(
        r"query ID: ([A-Za-z0-9_]+)", text
    )
    return found.group(1) if found else None


# -- reading back ----------------------------------------------------------------------------------


def read_ids(settings: KafkaSettings, topic: str, problems: list[str]) -> tuple[list[int], int]:
    """The ``ID`` of every record of ``topic`` read to its end (offsets from fetches), and how
    many records had none."""
    reader = consumer(settings, "abuse-check", partition_eof=True, fetch_wait_max_ms=100)
    ids, other = [], 0
    try:
        meta = admin_client(settings).list_topics(topic, timeout=10).topics.get(topic)
        partitions = sorted(meta.partitions) if meta is not None and meta.partitions else [0]
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        open_partitions, deadline = set(partitions), time.monotonic() + 120
        while open_partitions and time.monotonic() < deadline:
            message = reader.poll(1.0)
            if message is None:
                continue
            if (error := message.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(message.partition())
                continue
            try:
                ids.append(int(json.loads(message.value() or b"null")["ID"]))
            except (ValueError, TypeError, KeyError):
                other += 1
        if open_partitions:
            problems.append(f"{topic}: partitions {sorted(open_partitions)} not read to their end")
    finally:
        reader.close()
    return ids, other


def read_back(run: Run, settings: KafkaSettings, timeout_s: float) -> dict[str, Any]:
    """Wait until the CSAS output holds every good id and the CTAS counts are right (or the time is
    up, or nothing changed for a minute); what was found."""
    problems: list[str] = []
    deadline, last, still_since = time.monotonic() + timeout_s, None, time.monotonic()
    with httpx.Client(timeout=TIMEOUT_S) as client:
        while True:
            found: list[str] = []
            outputs, unreadable = read_ids(settings, OUTPUT_TOPIC, found)
            output = check_output(run.good_ids, outputs)
            counts = pull_counts(client, run.server.url)
            wrong = count_mismatches(run.good_ids, run.args.keys, counts or {})
            state = (len(outputs), tuple(sorted((counts or {}).items())))
            if state != last:
                last, still_since = state, time.monotonic()
            done = output.missing == 0 and not wrong
            if (
                done
                or time.monotonic() > deadline
                or time.monotonic() - still_since > 60
                or run.server.process.poll() is not None
            ):
                problems += found
                if counts is None:
                    problems.append("the CTAS could not be read by a pull query")
                return {
                    "output": output,
                    "unreadable": unreadable,
                    "wrong": wrong,
                    "problems": problems,
                }
            time.sleep(3)


def pull_counts(client: httpx.Client, url: str) -> dict[str, int] | None:
    try:
        response = client.post(f"{url}/query", json={"ksql": "SELECT * FROM COUNTS;"})
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return {
        item["row"]["columns"][0]: item["row"]["columns"][1]
        for item in response.json()
        if "row" in item
    }


def processing_log_entries(settings: KafkaSettings) -> int:
    problems: list[str] = []
    ids_and_other = read_ids(settings, "default_ksql_processing_log", problems)
    return len(ids_and_other[0]) + ids_and_other[1]


# -- the run ---------------------------------------------------------------------------------------


def soak(args: argparse.Namespace, work: Path, started: list[Any]) -> dict[str, Any]:
    broker = EmbeddedBroker(None)
    broker.start()
    started.append(broker)
    settings = broker.settings()
    server = Server(
        [
            "-b",
            broker.bootstrap_servers,
            "--state-dir",
            str(work / "server"),
            "--set",
            f"{LIMIT_SETTING}={args.limit}",
        ],
        work / "server.log",
    )
    started.append(server)
    server.wait_healthy()
    with httpx.Client(timeout=TIMEOUT_S) as client:
        for sql in SETUP:
            answer = client.post(
                f"{server.url}/ksql", json={"ksql": sql, "streamsProperties": EARLIEST}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"{sql}: {answer.status_code} {answer.text[:300]}")

    run = Run(server, settings, args)
    run.start()
    try:
        run.wait()
    finally:
        run.finish()
    loaded_s = time.monotonic() - run.t0
    settle_start = time.monotonic()
    verified = run.server_exits == 0
    back = read_back(run, settings, 300) if verified else None
    settle_s = time.monotonic() - settle_start
    with httpx.Client(timeout=TIMEOUT_S) as client:
        if server.process.poll() is None:
            run.check_queries(client)
        elif run.server_exits == 0:
            run.server_exits += 1
            run.note(f"the server exited after the load:\n{server.log_tail(30)}")
    output = back["output"] if back else check_output(run.good_ids, [])
    logged = processing_log_entries(settings)
    problems = back["problems"] if back else ["the server exited: nothing could be read back"]
    return {
        "minutes": args.minutes,
        "seed": args.seed,
        "limit": args.limit,
        "rate": args.rate,
        "loaded_s": round(loaded_s, 1),
        "settle_s": round(settle_s, 1),
        "verified": verified and not problems,
        "problems": problems,
        "server_exits": run.server_exits,
        "events": run.events,
        "good_written": len(run.good_ids),
        "good_kinds": dict(run.good_kinds),
        "poison_written": sum(run.poison.values()),
        "poison_kinds": dict(sorted(run.poison.items())),
        "produce_failures": run.produce_failures[:5],
        "processing_log_entries": logged,
        "output": {
            "inputs": output.inputs,
            "outputs": output.outputs,
            "duplicates": output.duplicates,
            "missing": output.missing,
            "unexpected": output.unexpected,
            "examples": list(output.examples),
            "unreadable": back["unreadable"] if back else 0,
        },
        "count_mismatches": back["wrong"][:10] if back else ["not read"],
        "errored_queries": run.errored,
        "left_in_error": sorted(run.in_error),
        "max_active": run.max_active,
        "cycles": run.cycles,
        "cycle_failures": run.cycle_failures[:10],
        "cycle_refused_by_limit": run.cycle_refused,
        "burst": {
            "accepted": run.burst["accepted"],
            "refused": run.burst["refused"],
            "unclean": run.burst["unclean"],
            "examples": run.burst_examples,
        },
        "push": dict(sorted(run.push.items())),
        "peak_rss_mb": round(run.rss_peak_mb),
        "peak_rss_at_s": round(run.rss_peak_at),
        "peak_server_process_rss_mb": round(run.server_rss_peak_mb),
        "peak_rss_sum_mb": round(run.rss_sum_peak_mb),
        "peak_rss_processes": run.rss_peak_processes,
        "rss_timeline": run.rss_timeline,
        "rss_budget_mb": args.rss_budget_mb or 1536 + 200 * args.limit,
        "info": {
            **latency_ms(run.info_s),
            "requests": len(run.info_s),
            "errors": sum(run.info_errors.values()),
            "error_kinds": dict(run.info_errors),
        },
        "info_p99_target_ms": args.info_p99_ms,
    }


def report(f: dict[str, Any]) -> None:
    print(
        f"hostile soak: one server, {f['loaded_s']:g} s of load (seed {f['seed']}, "
        f"{LIMIT_SETTING}={f['limit']}, {f['rate']:g} good records/s); read back in "
        f"{f['settle_s']:g} s"
    )
    print(
        f"  good records written: {f['good_written']:,} "
        f"({', '.join(f'{k} {n}' for k, n in sorted(f['good_kinds'].items()))})"
    )
    print(
        f"  poison records written: {f['poison_written']:,} "
        f"({', '.join(f'{k} {n}' for k, n in f['poison_kinds'].items())}); processing-log "
        f"entries: {f['processing_log_entries']:,}"
    )
    for failure in f["produce_failures"]:
        print(f"    produce failure: {failure}")
    out = f["output"]
    print(
        f"  CSAS output: {out['outputs']:,} records for {out['inputs']:,} good ids "
        f"({out['unreadable']} without an ID) {'; '.join(out['examples'])}"
    )
    print(
        f"  DDL cycles: {f['cycles']} (CSAS refused by the limit meanwhile: "
        f"{f['cycle_refused_by_limit']})"
    )
    for failure in f["cycle_failures"]:
        print(f"    failed: {failure}")
    b = f["burst"]
    print(
        f"  burst past the limit: {b['accepted']} accepted, {b['refused']} refused, "
        f"{b['unclean']} unclean"
    )
    for example in b["examples"]:
        print(f"    {example}")
    print(f"  push clients: {', '.join(f'{k} {n}' for k, n in f['push'].items()) or 'none'}")
    info = f["info"]
    print(
        f"  /info: {info['requests']:,} requests, p50 {info['p50_ms']:g} ms, p99 {info['p99_ms']:g} "
        f"ms, max {info['max_ms']:g} ms, errors {info['errors']} {info['error_kinds'] or ''}"
    )
    print(
        f"  peak memory (PSS) of the server's tree {f['peak_rss_mb']:,} MB at t={f['peak_rss_at_s']} s "
        f"(VmRSS summed: {f['peak_rss_sum_mb']:,} MB) "
        f"(budget: 1.5 GB + 200 MB per allowed query); the server's own process at most "
        f"{f['peak_server_process_rss_mb']:,} MB; at the peak: {f['peak_rss_processes']}"
    )
    for line in f["rss_timeline"]:
        print(f"    memory {line}")
    for query_id, message in f["errored_queries"].items():
        cause = "a record?" if query_id in by_a_record(f["errored_queries"]) else "Spark, retried"
        print(f"    seen in ERROR ({cause}): {query_id}: {message}")
    for mismatch in f["count_mismatches"]:
        print(f"    miscounted: {mismatch}")
    for problem in f["problems"]:
        print(f"  NOT VERIFIED: {problem}")
    for event in f["events"]:
        print(f"    {event}")
    for line in f["left_behind"]:
        print(f"    left behind: {line}")
    print()
    print(f"  {'figure':<50} {'value':>14} {'target':>14}  met")
    for v in verdicts(f):
        print(f"  {v.figure:<50} {v.value:>14} {v.target:>14}  {'yes' if v.met else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--limit", type=int, default=8, help=f"the server's {LIMIT_SETTING}")
    parser.add_argument("--rate", type=float, default=40.0, help="good records per second")
    parser.add_argument("--keys", type=int, default=16, help="keys of the good records")
    parser.add_argument("--poison-every", type=int, default=4, help="one poison per N good records")
    parser.add_argument(
        "--huge-every-s",
        type=float,
        default=15.0,
        help="seconds between 1.2 MB records (one good, one garbage, one deep)",
    )
    parser.add_argument("--cycles", type=int, default=40, help="most DDL cycles")
    parser.add_argument("--stuck", type=int, default=4, help="push clients that never read")
    parser.add_argument("--vanishing", type=int, default=40, help="push clients that vanish")
    parser.add_argument("--burst-extra", type=int, default=4, help="CSAS past the limit")
    parser.add_argument(
        "--rss-budget-mb",
        type=float,
        default=0,
        help="peak RSS target (0: 1.5 GB + 200 MB per allowed query)",
    )
    parser.add_argument("--info-p99-ms", type=float, default=1000.0, help="/info p99 target")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server log)")
    args = parser.parse_args()

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    if not args.json:
        print(versions("httpx", "granian", "pyspark"))
    work = Path(tempfile.mkdtemp(prefix="bench-abuse-"))
    marker = f"HEADWATER_ABUSE_RUN={uuid.uuid4().hex}"
    os.environ[marker.split("=")[0]] = marker.split("=")[1]
    started: list[Any] = []
    figures = None
    try:
        figures = soak(args, work, started)
    except KeyboardInterrupt:
        print("interrupted; everything started is being stopped", file=sys.stderr)
    finally:
        for thing in reversed(started):  # the server, then the broker
            try:
                thing.stop()
            except Exception as exc:  # noqa: BLE001  (stop the rest whatever happens)
                print(f"stopping {thing}: {exc!r}", file=sys.stderr)
        time.sleep(2)
        leftovers = kill_leftovers(marker)
        if args.keep or figures is None:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if figures is None:
        sys.exit(130)
    figures["left_behind"] = leftovers
    missed = [v.figure for v in verdicts(figures) if not v.met]
    if args.json:
        print(json.dumps({**figures, "missed": missed}, indent=1))
    else:
        report(figures)
        print(f"targets missed: {', '.join(missed) or 'none'}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
