"""Shared fixtures: embedded Kafka brokers on free loopback ports, stopped by pid in finalizers.

- ``memory_broker``: one in-memory Tansu for the whole session (fast; use unique topic names).
- ``durable_broker``: one Tansu on SeaweedFS for the whole session, in a tmp_path_factory folder.
- ``broker_factory``: brokers a test starts, stops, kills and restarts itself; all stopped at teardown.
- ``kafka_settings``: client settings for each storage mode (parametrized: memory, durable).
- ``memory_services``: a module's in-process server services on ``memory_broker`` (stores in memory):
  ``memory_services("name", limits=..., pull=...)``; closed after the module's last test.
- ``server_factory``: ``headwater server`` child processes on free ports, stopped by pid at teardown;
  the test then fails if a Spark process its servers started (JVMs, pyspark workers) outlives them,
  and those are killed so the next tests do not pay for them.

A missing broker binary FAILS these fixtures with a clear message (never a skip: a skip would hide a gap).
"""

from __future__ import annotations

import gc
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings
from headwater.kafka.errors import BinaryNotFound

BrokerFactory = Callable[[Path | None], EmbeddedBroker]


def _started(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> EmbeddedBroker:
    """Start `broker` with its stop registered first, so it is stopped even if start fails half-way."""

    def stop() -> None:
        # Clients caught in reference cycles (an exception's traceback) keep their connections open
        # until collected, and Tansu waits ~5 s for open connections when it gets SIGTERM.
        gc.collect()
        broker.stop()

    request.addfinalizer(stop)
    try:
        broker.start()
    except BinaryNotFound as exc:
        pytest.fail(f"the embedded broker cannot run here: {exc}", pytrace=False)
    return broker


@pytest.fixture(scope="session")
def memory_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """An in-memory embedded broker shared by the session."""
    return _started(EmbeddedBroker(None), request)


@pytest.fixture
def memory_kafka(memory_broker: EmbeddedBroker) -> KafkaSettings:
    """Client settings of the session's in-memory broker."""
    return memory_broker.settings()


@pytest.fixture(scope="session")
def durable_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> EmbeddedBroker:
    """A durable (SeaweedFS-backed) embedded broker shared by the session."""
    return _started(EmbeddedBroker(tmp_path_factory.mktemp("durable-broker")), request)


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Make brokers (`factory(data_dir_or_None)`, started); every one is stopped at teardown."""

    def make(data_dir: Path | None) -> EmbeddedBroker:
        return _started(EmbeddedBroker(data_dir), request)

    yield make


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.kafka),
        pytest.param("durable", marks=[pytest.mark.kafka, pytest.mark.durable]),
    ]
)
def kafka_settings(request: pytest.FixtureRequest) -> KafkaSettings:
    """Client settings for the session broker of each storage mode."""
    broker: EmbeddedBroker = request.getfixturevalue(f"{request.param}_broker")
    return broker.settings()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (the session brokers are shared)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"t-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def memory_services(
    memory_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Any]]:
    """``make(name, **options)``: the ``Services`` of one in-process server on the session's
    in-memory broker, with its own service id and its stores in memory (``options`` go to
    ``open_services``: ``limits``, ``pull``...); every one made is closed after the module."""
    import dataclasses
    from contextlib import ExitStack

    from headwater.gateway.startup import open_services  # the server's imports: only when used

    settings = dataclasses.replace(
        memory_broker.settings(),
        init_transactions_timeout_ms=3000,
        commit_transaction_timeout_ms=1500,
    )
    with ExitStack() as stack:

        def make(name: str, **options: Any) -> Any:
            folder = tmp_path_factory.mktemp(name)
            return stack.enter_context(
                open_services(
                    settings,
                    f"{name}-{uuid.uuid4().hex[:8]}",
                    folder,
                    stores_dir=folder,
                    stores_in_memory=True,
                    **options,
                )
            )

        yield make


# -- headwater server processes ----------------------------------------------------------------------


class ServerProcess:
    """A ``headwater server`` child process on a free port (see ``server_factory``)."""

    def __init__(
        self, args: list[str], port: int, log_path: Path, *, tls_ca: str | None = None
    ) -> None:
        self.args = args
        self.port = port
        self.host = f"127.0.0.1:{port}"  # its id in a cluster (the advertised host:port)
        self.url = f"{'https' if tls_ca else 'http'}://127.0.0.1:{port}"
        # with TLS: clients verify the server with the CA file
        self.verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=tls_ca) if tls_ca else True
        )
        self.auth: tuple[str, str] | None = None  # HTTP Basic credentials of ksql() and query()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True, timeout_s: float = 60.0) -> ServerProcess:
        """Start it; with ``wait``, return once ``/healthcheck`` answers 200."""
        exe = Path(sys.executable).with_name("headwater")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(exe), "server", "--port", str(self.port), *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if wait:
            self.wait_healthy(timeout_s)
        return self

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if (
                    httpx.get(f"{self.url}/healthcheck", timeout=1, verify=self.verify).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server not healthy after {timeout_s} s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def kill(self) -> None:
        """kill -9, by process id."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout_s``); the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def ksql(self, sql: str, **fields: object) -> httpx.Response:
        return httpx.post(
            f"{self.url}/ksql",
            json={"ksql": sql, **fields},
            timeout=30,
            verify=self.verify,
            auth=self.auth,
        )

    def query(self, sql: str, **fields: object) -> httpx.Response:
        return httpx.post(
            f"{self.url}/query",
            json={"ksql": sql, **fields},
            timeout=30,
            verify=self.verify,
            auth=self.auth,
        )


ServerFactory = Callable[..., ServerProcess]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Every server this test run starts carries this in its environment, and so do the processes it
#: starts (Spark's JVM, Python workers): the leftover check counts only this run's.
_MARK = "HEADWATER_TEST_RUN"
_RUN_MARK = os.environ.setdefault(_MARK, uuid.uuid4().hex)  # inherited by all this run starts


def _spark_pids() -> set[int]:
    """This test run's processes of Spark (JVMs), of headwater's Spark child and pyspark workers."""
    found = set()
    wanted = f"{_MARK}={_RUN_MARK}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            if not (
                b"org.apache.spark" in cmdline
                or b"pyspark.daemon" in cmdline
                or b"pyspark.worker" in cmdline
                or b"runner_forks" in cmdline  # the fork server and what it forked
                or b"_runner_launch" in cmdline  # a forked runner's client, started by the JVM
                or b"multiprocessing.spawn" in cmdline
            ):
                continue
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue  # another run's (a benchmark, another checkout's tests)
        except OSError:
            continue
        found.add(int(entry.name))
    return found


def _no_spark_left(before: set[int]) -> None:
    """Fails when a Spark process started since ``before`` is still alive 30 s on; kills it either way."""
    deadline = time.monotonic() + 30
    while (left := _spark_pids() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:  # do not leak into the next tests, whatever the verdict
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    assert not left, f"Spark processes outlived their servers: {sorted(left)}"


#: The servers a test (or its module) started, whose logs a failure report shows.
_SERVERS = pytest.StashKey[list[ServerProcess]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that started servers shows the end of each server's log: a failure in CI
    (a lost race, a timeout) is then explained by what the servers said, not only by the answer."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    module = item.getparent(pytest.Module)
    servers = item.stash.get(_SERVERS, []) + (module.stash.get(_SERVERS, []) if module else [])
    for index, server in enumerate(servers):
        if server.log_path.exists():
            report.sections.append((f"server {index} log ({server.host}), end", server.log()))


@contextmanager
def _making_servers(folder: Path, node: pytest.Item | pytest.Collector) -> Iterator[ServerFactory]:
    made: list[ServerProcess] = []
    node.stash[_SERVERS] = made
    before = _spark_pids()

    def make(*args: str, start: bool = True, tls_ca: str | None = None) -> ServerProcess:
        server = ServerProcess(
            list(args), free_port(), folder / f"server-{len(made)}.log", tls_ca=tls_ca
        )
        made.append(server)
        return server.start() if start else server

    try:
        yield make
    finally:
        for server in made:
            server.stop(10)
    _no_spark_left(before)


@pytest.fixture
def server_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerFactory]:
    """Make ``headwater server`` processes: ``factory(*args, start=True, tls_ca=None)`` (``tls_ca``:
    the server listens with TLS, and its helpers verify it with that CA file); all stopped at teardown,
    after which no Spark process they started may be left.

    Each gets a free port and a log file in ``tmp_path``; pass ``-b``, ``--state-dir`` etc. in args.
    """
    with _making_servers(tmp_path, request.node) as make:
        yield make


@pytest.fixture(scope="module")
def module_server_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerFactory]:
    """As ``server_factory``, for servers every test of a module shares (stopped after the last)."""
    with _making_servers(tmp_path_factory.mktemp("servers"), request.node) as make:
        yield make


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and localhost) and its unencrypted key, as PEM
    files (made with openssl: ``cryptography`` is not a dependency)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
