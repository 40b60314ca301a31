"""Helpers that run headwater nodes, for the node benchmarks (pull_qps, ddl_latency, startup, failover,
chaos), the RQTT runner and the cluster tests. Does I/O.

Starts ``headwater server`` as a child process on a free port (its log in a file), waits for it,
talks to it over HTTP, produces rows straight to table topics with confluent-kafka, and always stops
what it started (SIGTERM, wait, SIGKILL). Not a test itself (pytest collects no
file of tests/support/).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Self

import confluent_kafka
import httpx
import sqlglot

from headwater.kafka.clients import KafkaSettings, producer_config


def versions(*extra: str) -> str:
    """One line of versions: Python, sqlglot, confluent-kafka (librdkafka), the given packages, the
    platform, the CPU count and the load average (other processes compete for the same CPUs)."""
    parts = [
        f"Python {platform.python_version()}",
        f"sqlglot {sqlglot.__version__}",
        f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})",
    ]
    for name in extra:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} (not installed)")
    load = os.getloadavg()
    parts.append(f"{platform.platform()}, {os.cpu_count()} CPUs, load {load[0]:.2f}/{load[1]:.2f}")
    return ", ".join(parts)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, nearest rank."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def summary_ms(seconds: Sequence[float]) -> str:
    """``p50 .. p90 .. p99 .. max`` of durations in seconds, printed in milliseconds."""
    values = sorted(seconds)
    return (
        f"p50 {percentile(values, 50) * 1000:.1f} ms, p90 {percentile(values, 90) * 1000:.1f} ms, "
        f"p99 {percentile(values, 99) * 1000:.1f} ms, max {values[-1] * 1000:.1f} ms, "
        f"mean {statistics.fmean(values) * 1000:.1f} ms (n={len(values)})"
    )


def headwater_command() -> list[str]:
    """How to run the ``headwater`` command with this interpreter."""
    exe = Path(sys.executable).with_name("headwater")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "headwater.cli"]


class Server:
    """A ``headwater server`` child process on a free port; stop it with :meth:`stop` (or ``with``).

    Args:
        args: the arguments after ``headwater server`` (``--port`` is added).
        log_path: where its stdout and stderr go.
        prefix: run it under another command (e.g. a profiler).
    """

    def __init__(self, args: Sequence[str], log_path: Path, prefix: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.started = time.perf_counter()
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*prefix, *headwater_command(), "server", "--port", str(self.port), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise if the process has exited (with the end of its log)."""
        if self.process.poll() is not None:
            raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_healthy(self, timeout_s: float = 120.0) -> float:
        """Wait until ``GET /healthcheck`` answers 200; returns the seconds since the process start."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                self.check()
                try:
                    if client.get(f"{self.url}/healthcheck").status_code == 200:
                        return time.perf_counter() - self.started
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the server was not healthy in {timeout_s:g} s:\n{self.log_tail()}"
                    )
                time.sleep(0.02)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, wait, then SIGKILL (the server stops the broker it started itself)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait()
        # The server runs in its own session (process group = its pid): anything of that group
        # still alive (a child of a wrapper given as ``prefix``) is ours to stop too.
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def ksql(client: httpx.Client, url: str, text: str) -> list[dict[str, Any]]:
    """POST /ksql; raises with the body on an error status."""
    response = client.post(f"{url}/ksql", json={"ksql": text})
    if response.status_code != 200:
        raise RuntimeError(f"/ksql {response.status_code}: {response.text[:500]}")
    result: list[dict[str, Any]] = response.json()
    return result


def pull(client: httpx.Client, url: str, table: str, key: str) -> tuple[int, list[Any]]:
    """POST /query ``SELECT * FROM table WHERE ID = 'key'``: (HTTP status, rows' columns)."""
    response = client.post(
        f"{url}/query", json={"ksql": f"SELECT * FROM {table} WHERE ID = '{key}';"}
    )
    if response.status_code != 200:
        return response.status_code, []
    return 200, [item["row"]["columns"] for item in response.json() if "row" in item]


def wait_visible(
    client: httpx.Client,
    url: str,
    table: str,
    keys: Iterable[str],
    timeout_s: float = 300.0,
    server: Server | None = None,
) -> None:
    """Poll pull queries until every key in ``keys`` answers a row."""
    deadline = time.monotonic() + timeout_s
    for key in keys:
        while True:
            try:
                status, rows = pull(client, url, table, key)
            except httpx.HTTPError:
                status, rows = 0, []
            if status == 200 and rows:
                break
            if server is not None:
                server.check()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{table}: key {key!r} not visible after {timeout_s:g} s (last status {status})"
                )
            time.sleep(0.02)


def produce_rows(
    settings: KafkaSettings, topic: str, rows: Iterable[tuple[str, dict[str, Any]]]
) -> tuple[int, dict[int, str], float]:
    """Produce (key, value) rows to ``topic`` (STRING key in KAFKA format, JSON value), batched.

    Returns:
        (rows produced, the last key delivered to each partition, seconds).
    """
    # The project's producer settings (murmur2 placement), plus batching for a bulk load.
    config = producer_config(settings, "bench")
    config.update(
        {"linger.ms": 50, "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000}
    )
    sender = confluent_kafka.Producer(config)
    last: dict[int, str] = {}
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            last[message.partition()] = message.key().decode()

    start = time.perf_counter()
    count = 0
    dumps = json.dumps
    for key, value in rows:
        payload = dumps(value, separators=(",", ":")).encode()
        while True:
            try:
                sender.produce(topic, value=payload, key=key.encode(), on_delivery=delivered)
                break
            except BufferError:
                sender.poll(0.05)
        count += 1
        if count % 20_000 == 0:
            sender.poll(0)
    remaining = sender.flush(300)
    if remaining or failures:
        raise RuntimeError(f"{remaining} rows undelivered, {len(failures)} failed: {failures[:3]}")
    return count, last, time.perf_counter() - start


def summarize_collapsed(path: Path, interest: Sequence[str], top: int = 25) -> None:
    """Print the inclusive share of the frames of interest in a py-spy ``--format raw`` file."""
    from collections import Counter

    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames = set()
        for frame in stack.split(";"):
            name, _, where = frame.partition(" (")
            file = where.rstrip(")").rsplit(":", 1)[0]
            for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
                file = file.split(marker, 1)[-1]
            frames.add(f"{name} ({file})")
        total += int(count_text)
        for frame in frames:
            inclusive[frame] += int(count_text)
    print(f"  py-spy: {total:,} samples; inclusive share of the frames of interest:")
    shown = 0
    for frame, count in inclusive.most_common():
        if any(part in frame for part in interest) and shown < top:
            print(f"    {100 * count / total:5.1f}%  {frame}")
            shown += 1


# -- a cluster of servers: kill -9, SIGSTOP/SIGCONT, restart, in sync (failover, chaos) ---------


class Node(Server):
    """A cluster server that can be killed, frozen, and started again on the same port and state
    folder (its arguments carry ``--state-dir``)."""

    def __init__(self, args: Sequence[str], log_path: Path) -> None:
        super().__init__(args, log_path)
        self.args = list(args)
        self.host = f"127.0.0.1:{self.port}"
        self.paused = False

    @property
    def running(self) -> bool:
        """Whether the process is alive (frozen or not)."""
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9, by process id (and whatever of its process group is left, e.g. Spark)."""
        self.process.kill()
        self.process.wait(10)
        self.paused = False
        self._signal_group(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP."""
        os.kill(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT, if paused."""
        if self.paused:
            os.kill(self.process.pid, signal.SIGCONT)
            self.paused = False

    def relaunch(self) -> None:
        """Start the process again (same port, same arguments, same state folder)."""
        self.started = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*headwater_command(), "server", "--port", str(self.port), *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self, timeout_s: float = 30.0) -> None:
        self.resume()  # a stopped process cannot act on SIGTERM
        super().stop(timeout_s)


def cluster_status(client: httpx.Client, node: Node) -> dict[str, Any]:
    """``GET /clusterStatus`` of one node: its view of every host."""
    answer = client.get(f"{node.url}/clusterStatus", timeout=2)
    answer.raise_for_status()
    status: dict[str, Any] = answer.json()["clusterStatus"]
    return status


def assignment_of(status: dict[str, Any], table: str) -> dict[int, list[str]]:
    """{partition: [active, standbys...]} of ``table`` from one server's /clusterStatus."""
    replicas: dict[int, list[str]] = {}
    for host, view in status.items():
        query = view["activeStandbyPerQuery"].get(table, {})
        for item in query.get("activePartitions", []):
            replicas.setdefault(item["partition"], []).insert(0, host)
        for item in query.get("standByPartitions", []):
            replicas.setdefault(item["partition"], []).append(host)
    return replicas


def not_in_sync(
    client: httpx.Client, nodes: Sequence[Node], table: str, partitions: int
) -> str | None:
    """None when each node sees the others alive, every partition of ``table`` has an active and a
    standby on these nodes, and every replica reports lag 0; else what is not yet so."""
    hosts = {n.host for n in nodes}
    for node in nodes:
        try:
            status = cluster_status(client, node)
        except httpx.HTTPError as exc:
            return f"{node.host}: {exc!r}"
        if down := [h for h in hosts if not status.get(h, {}).get("hostAlive")]:
            return f"{node.host} sees {down} down"
        assignment = assignment_of(status, table)
        for partition in range(partitions):
            replicas = assignment.get(partition, [])
            if len(replicas) != min(2, len(hosts)) or not set(replicas) <= hosts:
                return f"{node.host}: partition {partition} on {replicas}"
            for host in replicas:
                lags = status[host]["hostStoreLags"]["stateStoreLags"].get(table, {})
                info = lags.get("lagByPartition", {}).get(str(partition))
                if info is None or info["offsetLag"] != 0:
                    return f"{node.host}: {host} partition {partition}: {info}"
    return None


def wait_in_sync(nodes: Sequence[Node], table: str, partitions: int, timeout_s: float) -> float:
    """Seconds until :func:`not_in_sync` holds (raises TimeoutError after ``timeout_s``)."""
    start = time.monotonic()
    with httpx.Client() as client:
        while (why := not_in_sync(client, nodes, table, partitions)) is not None:
            for node in nodes:
                node.check()
            if time.monotonic() - start > timeout_s:
                raise TimeoutError(f"not in sync after {timeout_s:g} s: {why}")
            time.sleep(0.02)
    return time.monotonic() - start
