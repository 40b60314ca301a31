"""Benchmark: HA pull queries on a 3-server cluster under load: kill -9, SIGSTOP, restart (issue 9).

Starts an in-memory embedded broker (Tansu) in this process and three ``headwater server``
processes on it (one service id, ``num.standby.replicas`` 1, tags zone=z1/z2/z3 with
``rack.aware.assignment.tags=zone``, each with its own --state-dir), creates
``T (ID STRING PRIMARY KEY, V BIGINT)`` over a 6-partition topic and produces --rows rows straight
to it. Then --clients client threads (each bound to one server, spread evenly) send ``SELECT * FROM
T WHERE ID = '<random key>';`` with ``acceptable.offset.lag`` = --bound while a writer updates
random keys at --write-rate records/s, through these phases:

1. baseline, --baseline s (the cluster's QPS and latency are taken here);
2. kill -9 of the server holding the most actives, then --after-kill s; each survivor's
   ``/clusterStatus`` is polled every 20 ms until it marks the dead server down;
3. SIGSTOP of another server for --stopped s, SIGCONT, then --after-stop s;
4. restart of the killed server on its state folder, then --after-restart s, while it is polled
   until every server sees every other alive and every replica reports lag 0.

A query "fails" when it gets no 200 or takes over 1 s. Queries to the killed server (until it is
healthy again) and to the SIGSTOP'd one (while stopped) are excluded from "through survivors".
Which answers standbys served is judged against the assignment a status poller samples every
100 ms. Finally one server alone (a fresh state folder, another service id, the same topic) gets
the same client load for --baseline s, for the QPS/p50/p99 comparison.

Everything started here is stopped on exit, Ctrl-C or an error (SIGCONT first, then SIGTERM, then
SIGKILL, by process id). This module does I/O; it is never collected by pytest.

Run from the repository root: ``python -m bench.failover [--rows N] [--clients C]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import confluent_kafka
import httpx

from headwater.kafka.clients import KafkaSettings, producer_config
from tests.support.node import (
    Node,
    cluster_status,
    ksql,
    percentile,
    produce_rows,
    versions,
    wait_visible,
)
from tests.support.node import assignment_of as _assignment_of
from tests.support.node import wait_in_sync as _wait_in_sync

TABLE = "T"
TOPIC = "bench_failover"
PARTITIONS = 6
ZONES = ("z1", "z2", "z3")
CREATE_TABLE = (
    f"CREATE TABLE {TABLE} (ID STRING PRIMARY KEY, V BIGINT) WITH (kafka_topic='{TOPIC}', "
    f"partitions={PARTITIONS}, value_format='JSON');"
)
SLOW_S = 1.0
QUERY_TIMEOUT_S = 5.0


# -- servers (Node, cluster_status: tests/support/node.py) ---------------------------------------


def assignment_of(status: dict[str, Any]) -> dict[int, list[str]]:
    return _assignment_of(status, TABLE)


def wait_in_sync(nodes: Sequence[Node], timeout_s: float) -> float:
    return _wait_in_sync(nodes, TABLE, PARTITIONS, timeout_s)


def mark_down_times(
    survivors: Sequence[Node], dead: str, since: float, timeout_s: float
) -> list[float]:
    """Seconds from ``since`` until each survivor's /clusterStatus marks ``dead`` down (20 ms
    polls)."""
    found: dict[str, float] = {}
    with httpx.Client() as client:
        while len(found) < len(survivors) and time.monotonic() - since < timeout_s:
            for node in survivors:
                if node.host in found:
                    continue
                try:
                    if not cluster_status(client, node).get(dead, {}).get("hostAlive", True):
                        found[node.host] = time.monotonic() - since
                except httpx.HTTPError:
                    pass
            time.sleep(0.02)
    return [found.get(n.host, float("inf")) for n in survivors]


def wait_alive(observers: Sequence[Node], host: str, timeout_s: float) -> float:
    """Seconds until every observer's /clusterStatus says ``host`` is alive."""
    start = time.monotonic()
    with httpx.Client() as client:
        while time.monotonic() - start < timeout_s:
            try:
                if all(cluster_status(client, n).get(host, {}).get("hostAlive") for n in observers):
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
    return float("inf")


# -- load ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One pull query as a client saw it."""

    node: int
    start: float
    end: float
    status: int  # 0: no HTTP answer
    served: tuple[tuple[int, str, int], ...]  # (partition, host, lag)
    error: str

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def failed(self) -> bool:
        return self.status != 200 or self.seconds > SLOW_S


class Load:
    """Client threads bound to nodes (i % len(nodes)), a writer, and an assignment poller."""

    def __init__(
        self,
        nodes: Sequence[Node],
        clients: int,
        rows: int,
        bound: int,
        kafka: KafkaSettings,
        write_rate: float,
        seed: int,
    ) -> None:
        self.samples: list[Sample] = []
        self.assignments: list[tuple[float, dict[int, list[str]]]] = []
        self.written = 0
        self._nodes, self._rows, self._bound = nodes, rows, bound
        self._kafka, self._write_rate, self._seed = kafka, write_rate, seed
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)
        ]
        if write_rate > 0:
            self._threads.append(threading.Thread(target=self._writer, daemon=True))
        if len(nodes) > 1:
            self._threads.append(threading.Thread(target=self._poll_assignment, daemon=True))

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(QUERY_TIMEOUT_S + 5)

    def _client(self, index: int) -> None:
        node = index % len(self._nodes)
        url = self._nodes[node].url
        chooser = random.Random(self._seed * 1000 + index)
        props = {"acceptable.offset.lag": self._bound}
        with httpx.Client(timeout=QUERY_TIMEOUT_S) as client:
            while not self._stop.is_set():
                key = f"k{chooser.randrange(self._rows)}"
                body = {
                    "ksql": f"SELECT * FROM {TABLE} WHERE ID = '{key}';",
                    "streamsProperties": props,
                }
                start = time.monotonic()
                status, served, error = 0, (), ""
                try:
                    answer = client.post(f"{url}/query", json=body)
                    status = answer.status_code
                    items = answer.json()
                    if status == 200:
                        served = tuple(
                            (s["partition"], s["host"], s["lag"])
                            for i in items
                            if "header" in i
                            for s in i["header"].get("servedBy", ())
                        )
                    else:
                        error = f"{items.get('error_code')}: {items.get('message')}"
                except (httpx.HTTPError, ValueError) as exc:
                    error = type(exc).__name__
                self.samples.append(Sample(node, start, time.monotonic(), status, served, error))
                if status != 200:
                    self._stop.wait(0.02)  # no busy loop against a dead server

    def _writer(self) -> None:
        config = producer_config(self._kafka, "bench-failover-writer")
        producer = confluent_kafka.Producer(config)
        chooser = random.Random(self._seed)
        interval = 1 / self._write_rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.written += 1
            key = f"k{chooser.randrange(self._rows)}"
            producer.produce(
                TOPIC, key=key.encode(), value=json.dumps({"V": -self.written}).encode()
            )
            producer.poll(0)
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))
        producer.flush(10)

    def _poll_assignment(self) -> None:
        with httpx.Client() as client:
            while not self._stop.is_set():
                for node in self._nodes:
                    if node.paused or node.process.poll() is not None:
                        continue
                    try:
                        self.assignments.append(
                            (time.monotonic(), assignment_of(cluster_status(client, node)))
                        )
                        break
                    except (httpx.HTTPError, ValueError, KeyError):
                        continue
                self._stop.wait(0.1)


# -- figures ---------------------------------------------------------------------------------------


def rate_line(samples: Sequence[Sample], seconds: float) -> str:
    ok = sorted(s.seconds for s in samples if s.status == 200)
    if not ok:
        return "no answers"
    return (
        f"{len(ok) / seconds:,.0f} QPS, p50 {percentile(ok, 50) * 1000:.1f} ms, "
        f"p99 {percentile(ok, 99) * 1000:.1f} ms, max {ok[-1] * 1000:.0f} ms "
        f"({len(ok):,} answers, {len(samples) - len(ok)} failed)"
    )


def failure_windows(samples: Iterable[Sample]) -> list[tuple[float, float]]:
    """Merged time spans covered by failed or slow queries."""
    merged: list[tuple[float, float]] = []
    for begin, finish in sorted((s.start, s.end) for s in samples if s.failed):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
        else:
            merged.append((begin, finish))
    return merged


def active_at(
    assignments: Sequence[tuple[float, dict[int, list[str]]]], when: float, partition: int
) -> str | None:
    """The partition's active in the last assignment sampled before ``when``."""
    best = None
    for at, assignment in assignments:
        if at > when:
            break
        best = assignment
    replicas = best.get(partition) if best else None
    return replicas[0] if replicas else None


def mark(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


# -- runs ------------------------------------------------------------------------------------------


def start_nodes(work: Path, bootstrap: str, service_id: str, count: int) -> list[Node]:
    nodes: list[Node] = []
    try:
        for i in range(count):
            zone = ZONES[i % len(ZONES)]
            args = [
                "-b",
                bootstrap,
                "--service-id",
                service_id,
                "--state-dir",
                str(work / f"{service_id}-{zone}"),
                "--set",
                f"client.tag.zone={zone}",
                "--set",
                "rack.aware.assignment.tags=zone",
            ]
            nodes.append(Node(args, work / f"{service_id}-{zone}.log"))
        for node in nodes:
            node.wait_healthy()
    except BaseException:
        for node in nodes:
            node.stop(10)
        raise
    return nodes


def run_cluster(args: argparse.Namespace, broker: Any, work: Path) -> tuple[list[Sample], float]:
    """The failover scenario; prints its figures and returns the baseline samples and seconds."""
    nodes = start_nodes(work, broker.bootstrap_servers, "bench-ha", 3)
    try:
        with httpx.Client(timeout=30.0) as client:
            ksql(
                client,
                nodes[0].url,
                CREATE_TABLE,
            )
            count, last, seconds = produce_rows(
                broker.settings(), TOPIC, ((f"k{i}", {"V": i}) for i in range(args.rows))
            )
            start = time.perf_counter()
            for node in nodes:
                wait_visible(client, node.url, TABLE, last.values(), server=node)
            synced = wait_in_sync(nodes, 120)
            print(
                f"table {TABLE}: {count:,} rows over {PARTITIONS} partitions, produced in "
                f"{seconds:.1f} s, visible on all 3 servers "
                f"{time.perf_counter() - start:.1f} s later "
                f"(all replicas lag 0 after another {synced:.1f} s)"
            )
            assignment = assignment_of(cluster_status(client, nodes[0]))
        actives = [sum(1 for r in assignment.values() if r[0] == n.host) for n in nodes]
        victim = max(range(3), key=lambda i: (actives[i], -i))
        survivors = [n for i, n in enumerate(nodes) if i != victim]
        described = (
            f"#{i} {n.host} (zone {ZONES[i]}, {actives[i]} actives)" for i, n in enumerate(nodes)
        )
        print(f"servers {', '.join(described)}")

        load = Load(
            nodes,
            args.clients,
            args.rows,
            args.bound,
            broker.settings(),
            args.write_rate,
            args.seed,
        )
        with load:
            t0 = time.monotonic()
            time.sleep(args.baseline)
            t_kill = time.monotonic()
            nodes[victim].kill()
            down = mark_down_times(survivors, nodes[victim].host, t_kill, 10)
            time.sleep(max(0.0, t_kill + args.after_kill - time.monotonic()))

            with httpx.Client() as client:
                now_assigned = assignment_of(cluster_status(client, survivors[0]))
            paused_index = max(
                (i for i in range(3) if i != victim),
                key=lambda i: sum(1 for r in now_assigned.values() if r[0] == nodes[i].host),
            )
            paused = nodes[paused_index]
            running = [n for i, n in enumerate(nodes) if i not in (victim, paused_index)]
            t_stop = time.monotonic()
            paused.pause()
            time.sleep(args.stopped)
            t_cont = time.monotonic()
            paused.resume()
            rejoined = wait_alive(running, paused.host, 30)
            time.sleep(max(0.0, t_cont + args.after_stop - time.monotonic()))

            t_restart = time.monotonic()
            nodes[victim].relaunch()
            healthy = nodes[victim].wait_healthy()
            t_healthy = time.monotonic()
            alive_again = wait_alive(survivors, nodes[victim].host, 60)
            try:
                in_sync = wait_in_sync(nodes, 120)
            except TimeoutError as exc:
                print(f"  restarted server: {exc}")
                in_sync = float("inf")
            in_sync_at = time.monotonic()
            time.sleep(max(0.0, t_restart + args.after_restart - time.monotonic()))
        t_end = time.monotonic()
    finally:
        for node in nodes:
            node.stop(10)

    samples = load.samples
    baseline = [s for s in samples if s.start >= t0 and s.end <= t_kill]

    def excluded(s: Sample) -> bool:
        if s.node == victim and s.end >= t_kill and s.start <= t_healthy:
            return True
        return s.node == paused_index and s.end >= t_stop and s.start <= t_cont

    through_survivors = [s for s in samples if s.start >= t0 and not excluded(s)]
    failed = [s for s in through_survivors if s.failed]
    stop_window = [s for s in through_survivors if s.end >= t_stop and s.start <= t_cont + 1.0]
    windows = failure_windows(through_survivors)
    longest = max(windows, key=lambda w: w[1] - w[0], default=None)
    answered = [s for s in samples if s.status == 200]
    beyond = sum(1 for s in answered for (_, _, lag) in s.served if lag > args.bound)
    standby_lags = sorted(
        lag
        for s in answered
        for (p, host, lag) in s.served
        if host != active_at(load.assignments, s.start, p)
    )
    served_total = sum(len(s.served) for s in answered)

    def phase(s: Sample) -> str:
        for name, begin in (
            ("after restart", t_restart),
            ("after SIGCONT", t_cont),
            ("SIGSTOP", t_stop),
            ("after kill -9", t_kill),
        ):
            if s.start >= begin:
                return name
        return "baseline"

    print(
        f"phases: baseline {args.baseline:g} s; kill -9 of #{victim} ({nodes[victim].host}, "
        f"{actives[victim]} actives), {args.after_kill:g} s; SIGSTOP of #{paused_index} "
        f"({paused.host}) {args.stopped:g} s, SIGCONT, {args.after_stop:g} s; restart of "
        f"#{victim}, {args.after_restart:g} s; {args.clients} clients (2 per server by default), "
        f"acceptable.offset.lag={args.bound}, writer {args.write_rate:g} updates/s "
        f"({load.written:,} written)"
    )
    print(f"  baseline, 3 servers:          {rate_line(baseline, t_kill - t0)}")
    for node, seconds in zip(survivors, down, strict=True):
        print(
            f"  dead server marked down on {node.host}'s /clusterStatus after "
            f"{seconds * 1000:.0f} ms  (target <= 1 s: {mark(seconds, 1.0)})"
        )
    print(
        f"  failed or >1 s queries through the surviving servers: {len(failed)} of "
        f"{len(through_survivors):,}  (target 0: {mark(len(failed), 0)})"
    )
    for name, n in sorted(Counter(phase(s) for s in failed).items()):
        print(f"    {name}: {n}, e.g.")
        for s in [s for s in failed if phase(s) == name][: args.examples]:
            print(
                f"      t={s.start - t0:.3f} s via #{s.node}: {s.seconds:.3f} s, status {s.status} "
                f"{s.error[:150] if args.examples <= 2 else s.error}"
            )
    total_failed = sum(1 for s in samples if s.start >= t0 and s.failed)
    print(
        f"  failed or >1 s queries in total (dead and stopped servers included): {total_failed:,} "
        f"of {len(samples):,}"
    )
    if longest is not None:
        print(
            f"  longest window with a failed or >1 s query (survivors): "
            f"{(longest[1] - longest[0]) * 1000:.0f} ms, from t={longest[0] - t0:.3f} s "
            f"(kill -9 at t={t_kill - t0:.3f} s, SIGSTOP at t={t_stop - t0:.3f} s, "
            f"restart at t={t_restart - t0:.3f} s)"
        )
    else:
        print("  longest window with a failed or >1 s query (survivors): none")
    print(
        f"  SIGSTOP window: {rate_line(stop_window, t_cont + 1.0 - t_stop)}; longest query "
        f"{max((s.seconds for s in stop_window), default=0) * 1000:.0f} ms through the running "
        f"server{'s' if len(running) > 1 else ''}"
    )
    print(
        f"  SIGCONT'd server alive again on the others' /clusterStatus after "
        f"{rejoined * 1000:.0f} ms"
    )
    print(
        f"  answers beyond their bound: {beyond} of {served_total:,} partition answers  "
        f"(target 0: {mark(beyond, 0)})"
    )
    if standby_lags:
        histogram = Counter(min(lag, 10) for lag in standby_lags)
        shape = ", ".join(
            f"{'>=10' if lag == 10 else lag}: {n}" for lag, n in sorted(histogram.items())
        )
        print(
            f"  standby-served answers: {len(standby_lags):,} "
            f"({100 * len(standby_lags) / max(1, served_total):.1f}%), "
            f"lag max {standby_lags[-1]}, p50 {percentile(standby_lags, 50)}, "
            f"p99 {percentile(standby_lags, 99)}; by lag {shape}"
        )
    else:
        print("  standby-served answers: none")
    print(
        f"  restarted server: healthy after {healthy:.2f} s, alive on the survivors' "
        f"/clusterStatus {alive_again:.2f} s later, in sync (all alive, every replica lag 0) "
        f"{in_sync:.2f} s after "
        f"that, {in_sync_at - t_restart:.2f} s after the restart  (target: in sync with no manual "
        f"action: {'ok' if in_sync != float('inf') else 'MISSED'})"
    )
    del t_end
    return baseline, t_kill - t0


def run_single(args: argparse.Namespace, broker: Any, work: Path) -> tuple[list[Sample], float]:
    nodes = start_nodes(work, broker.bootstrap_servers, "bench-single", 1)
    try:
        with httpx.Client(timeout=30.0) as client:
            ksql(
                client,
                nodes[0].url,
                CREATE_TABLE,
            )
            wait_visible(client, nodes[0].url, TABLE, [f"k{args.rows - 1}"], server=nodes[0])
        wait_in_sync(nodes, 120)
        load = Load(
            nodes,
            args.clients,
            args.rows,
            args.bound,
            broker.settings(),
            args.write_rate,
            args.seed,
        )
        with load:
            t0 = time.monotonic()
            time.sleep(args.baseline)
            t1 = time.monotonic()
    finally:
        for node in nodes:
            node.stop(10)
    return [s for s in load.samples if s.start >= t0 and s.end <= t1], t1 - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument(
        "--bound", type=int, default=100, help="acceptable.offset.lag of every query"
    )
    parser.add_argument("--write-rate", type=float, default=50.0, help="updates/s during the run")
    parser.add_argument("--baseline", type=float, default=10.0)
    parser.add_argument("--after-kill", type=float, default=10.0)
    parser.add_argument("--stopped", type=float, default=5.0)
    parser.add_argument("--after-stop", type=float, default=10.0)
    parser.add_argument("--after-restart", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--examples", type=int, default=2, help="failed queries shown per phase")
    parser.add_argument("--no-single", action="store_true", help="skip the single-server run")
    args = parser.parse_args()

    from headwater.kafka.broker import EmbeddedBroker

    print(versions("pyspark", "httpx", "starlette", "uvicorn"))
    print(
        f"{args.clients} client threads in this process, on the same machine as the servers and "
        "the broker: all share the CPUs"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    try:
        with EmbeddedBroker(None, port=0) as broker:
            cluster, cluster_s = run_cluster(args, broker, work)
            if not args.no_single:
                single, single_s = run_single(args, broker, work)
                print(f"  one server, same load:         {rate_line(single, single_s)}")
                ok_cluster = sum(1 for s in cluster if s.status == 200) / cluster_s
                ok_single = sum(1 for s in single if s.status == 200) / single_s
                print(
                    f"  3-server cluster at {100 * ok_cluster / max(ok_single, 1e-9):.0f}% of one "
                    "server's QPS (queries for partitions active elsewhere take one more HTTP hop)"
                )
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
