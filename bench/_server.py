"""A benchmark's node: an in-memory embedded broker and one ``headwater server`` process on it.

Shared by the benchmarks (not one itself).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from confluent_kafka import TopicPartition

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer
from tests.support.node import free_port


class BenchServer:
    """One ``headwater server`` child process on a broker, in its own state folder."""

    def __init__(self, bootstrap: str, folder: Path, extra: tuple[str, ...] = ()) -> None:
        self.bootstrap, self.folder, self.extra = bootstrap, folder, extra
        self.service_id = f"bench_{uuid.uuid4().hex[:6]}"
        self._start()

    def _start(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = Path(sys.executable).with_name("headwater")
        self.log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                str(exe),
                "server",
                "-b",
                self.bootstrap,
                "--port",
                str(self.port),
                "--state-dir",
                str(self.folder / "node"),
                "--service-id",
                self.service_id,
                *self.extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthcheck", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit("the server did not become healthy in 60 s")

    def restart(self) -> None:
        """Stop the server, then start it again on the same state folder and service id."""
        self.stop()
        self._start()

    def wait_for_spark(self, since: float, timeout_s: float = 180) -> None:
        """Wait until the server reports Spark up (``headwater.engine.start=startup``); ``since``
        is the ``time.monotonic()`` the wait is counted from (the server's start)."""
        while httpx.get(f"{self.url}/queryStatus", timeout=5).json().get("spark") != "UP":
            if time.monotonic() - since > timeout_s:
                raise SystemExit(f"Spark was not up {timeout_s:g} s after the server started")
            time.sleep(0.2)

    def wait_for_warm_up(self, since: float, timeout_s: float = 240) -> None:
        """Wait, after `wait_for_spark`, until the background warm-up of Spark's stateful operators
        has finished (its line in the node's spark.log): a measurement that starts sooner shares
        the cores with it (bench.race measured 26k instead of 38k records/s)."""
        log = self.folder / "node" / "logs" / "spark.log"
        while "Spark's stateful operators" not in (log.read_text() if log.exists() else ""):
            if time.monotonic() - since > timeout_s:
                raise SystemExit(f"Spark's warm-up did not finish {timeout_s:g} s after the start")
            time.sleep(0.5)

    def ksql(self, sql: str, properties: dict[str, str] | None = None) -> list[dict]:
        answer = httpx.post(
            f"{self.url}/ksql",
            json={"ksql": sql, "streamsProperties": properties or {}},
            timeout=60,
        )
        if answer.status_code != 200:
            raise SystemExit(f"{sql}\n-> {answer.text}")
        return answer.json()  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@contextmanager
def bench_node(extra: tuple[str, ...] = ()) -> Iterator[tuple[EmbeddedBroker, BenchServer]]:
    """An in-memory embedded broker and one server on it, both stopped on exit, a SIGTERM to the
    benchmark included (it would otherwise leave the server and its Spark running)."""
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with tempfile.TemporaryDirectory() as scratch, EmbeddedBroker(None) as broker:
            server = BenchServer(broker.bootstrap_servers, Path(scratch), extra)
            try:
                yield broker, server
            finally:
                server.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def wait_records(broker: EmbeddedBroker, topic: str, want: int, timeout_s: float) -> float:
    """Seconds until ``want`` records are on ``topic`` (2 partitions), from now."""
    started = time.monotonic()
    reader = consumer(broker.settings(), f"bench-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=10)
    reader.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen = 0
    try:
        while seen < want:
            if time.monotonic() - started > timeout_s:
                raise SystemExit(f"{topic}: {seen} of {want} records after {timeout_s} s")
            seen += sum(1 for m in reader.consume(10_000, 0.05) if m.error() is None)
    finally:
        reader.close()
    return time.monotonic() - started
