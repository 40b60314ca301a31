"""The embedded Kafka broker: Tansu on 127.0.0.1, in memory or durable on SeaweedFS. Does I/O.

Used by ``headwater broker``, by the test fixtures and (later) by ``headwater server`` when no Kafka is
configured. In memory, topics live in Tansu's process and die with it. With a data folder, Tansu keeps
everything in SeaweedFS's S3 store (``<data dir>/seaweedfs``): topics, records, headers and group
offsets survive a restart and a ``kill -9`` of either process.

Layout of a data folder: ``seaweedfs/`` (the store), ``logs/tansu.log`` and ``logs/weed.log`` (the
children's output, appended per start), ``broker.lock`` (held while a broker uses the folder). In
memory the logs go to a temporary folder removed at stop.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Self

from confluent_kafka import KafkaException

from headwater.kafka._binaries import tansu_binary, weed_binary
from headwater.kafka._ports import LOOPBACK, free_port, port_is_free
from headwater.kafka._process import ChildProcess
from headwater.kafka._seaweed import BUCKET, start_seaweed
from headwater.kafka.clients import KafkaSettings, admin_client
from headwater.kafka.errors import (
    BrokerError,
    ChildDied,
    DataDirUnusable,
    PortInUse,
    StartTimeout,
)

log = logging.getLogger(__name__)

_POLL_INTERVAL_S = 0.02
# How children are stopped (measured with a client still connected, durable mode, 2 cores):
# Tansu drains its connections for 5 s on SIGTERM but exits at once on SIGINT, and loses nothing
# either way (a record is acknowledged only once its object is written to the store); SeaweedFS
# shuts its filer and volume server down in ~2.3 s on SIGTERM (the same on SIGINT) and may take far
# longer under load, so it gets a short grace and then SIGKILL, which it survives (its files are
# written before it answers a PUT: see test_records_survive_kill_9).
_TANSU_STOP = (signal.SIGINT, 5.0)
_WEED_STOP = (signal.SIGTERM, 4.0)
_WATCH_INTERVAL_S = 0.5
# Tansu logs `Io(Os { code: 98, kind: AddrInUse, ... })` and panics (exit status 0) on a taken port.
_BIND_FAILURE = "AddrInUse"


class EmbeddedBroker:
    """Tansu (and, when durable, SeaweedFS) as child processes of this process.

    Use as a context manager, or call ``start()`` and ``stop()``. Children are stopped by pid, and die
    with this process even on ``kill -9`` (see ``_process``).

    Args:
        data_dir: durable when given (created if missing), in memory when None.
        port: Kafka listener port on 127.0.0.1; 0 picks a free one.
        start_timeout_s: how long each child may take to become ready.
    """

    def __init__(
        self, data_dir: Path | None = None, port: int = 0, *, start_timeout_s: float = 30.0
    ) -> None:
        self.data_dir = data_dir.resolve() if data_dir is not None else None
        self.requested_port = port
        self.start_timeout_s = start_timeout_s
        self.port: int | None = None
        self.start_seconds: float | None = None
        self._tansu: ChildProcess | None = None
        self._weed: ChildProcess | None = None
        self._lock: IO[bytes] | None = None
        self._scratch: Path | None = None

    # -- what callers read -----------------------------------------------------------------------

    @property
    def durable(self) -> bool:
        """Whether the broker keeps its data in `data_dir`."""
        return self.data_dir is not None

    @property
    def bootstrap_servers(self) -> str:
        """ "127.0.0.1:PORT" of the running broker."""
        if self.port is None:
            raise BrokerError("the embedded broker is not running")
        return f"{LOOPBACK}:{self.port}"

    def settings(self) -> KafkaSettings:
        """Client settings for this broker (replication factor 1: it is a single broker)."""
        return KafkaSettings(bootstrap_servers=self.bootstrap_servers, replication_factor=1)

    @property
    def pids(self) -> dict[str, int]:
        """Process id of each running child, by name ("tansu", "weed")."""
        return {child.name: child.pid for child in (self._tansu, self._weed) if child is not None}

    def describe(self) -> str:
        """One line for people: where the data lives."""
        return f"durable in {self.data_dir}" if self.data_dir is not None else "in memory"

    def check_alive(self) -> None:
        """Raise ChildDied (with its log tail) if a child has exited since start."""
        for child in (self._tansu, self._weed):
            if child is not None:
                code = child.exit_code()
                if code is not None:
                    raise ChildDied(
                        f"{child.name} (pid {child.pid}) exited with status {code}",
                        log_tail=child.log_tail(),
                    )

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the children and wait until the broker answers metadata requests.

        Raises:
            BinaryNotFound: tansu (or weed, when durable) is not installed.
            PortInUse: the requested port is taken.
            DataDirUnusable: the data folder cannot be written or is in use by another broker.
            ChildDied: a child exited while starting (the message holds the end of its log).
            StartTimeout: a child did not become ready in time.
        """
        if self._tansu is not None:
            raise BrokerError("the embedded broker is already running")
        began = time.monotonic()
        tansu = tansu_binary()
        weed = weed_binary() if self.durable else None
        if self.requested_port and not port_is_free(self.requested_port):
            raise PortInUse(
                f"port {self.requested_port} on {LOOPBACK} is already in use: stop what listens "
                "there, or choose another port (--port 0 picks a free one)"
            )
        try:
            logs = self._prepare_folders()
            storage, env = "memory://tansu/", {"PATH": os.defpath, "NO_COLOR": "1"}  # plain logs
            if weed is not None:
                assert self.data_dir is not None and self._scratch is not None
                self._weed, access = start_seaweed(
                    weed,
                    self.data_dir / "seaweedfs",
                    self._scratch,
                    logs / "weed.log",
                    self.start_timeout_s,
                )
                storage, env = f"s3://{BUCKET}/", {**env, **access.environment()}
            self._start_tansu(tansu, storage, env, logs / "tansu.log")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        log.info(
            "embedded broker ready on %s (%s) in %.2f s",
            self.bootstrap_servers,
            self.describe(),
            self.start_seconds,
        )

    def stop(self) -> None:
        """Stop every child this object started (broker first, then its store), by pid.

        Safe to call twice, after a failed start, and after a child was killed from outside.
        """
        for child, (stop_signal, timeout_s) in (
            (self._tansu, _TANSU_STOP),
            (self._weed, _WEED_STOP),
        ):
            if child is not None:
                child.stop(timeout_s=timeout_s, stop_signal=stop_signal)
        self._forget()

    def kill(self) -> None:
        """SIGKILL every child (as a crash would), reap them and forget them. For tests."""
        for child in (self._tansu, self._weed):
            if child is not None:
                child.kill()
        self._forget()

    # -- internals -------------------------------------------------------------------------------

    def _forget(self) -> None:
        self._tansu = self._weed = None
        self.port = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None

    def _prepare_folders(self) -> Path:
        """Create the folders, take the data folder's lock, and return the log folder."""
        # A short-pathed scratch folder: unix socket paths are limited to ~107 bytes.
        self._scratch = Path(tempfile.mkdtemp(prefix="headwater-broker-"))
        if self.data_dir is None:
            return self._scratch
        try:
            (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
            self._lock = (self.data_dir / "broker.lock").open("wb")
        except OSError as exc:
            raise DataDirUnusable(
                f"data folder {self.data_dir} is not usable: {exc.strerror or exc}"
            ) from exc
        if not os.access(self.data_dir, os.W_OK) or not os.access(self.data_dir / "logs", os.W_OK):
            raise DataDirUnusable(f"data folder {self.data_dir} is not writable")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise DataDirUnusable(
                f"data folder {self.data_dir} is in use by another headwater broker"
            ) from exc
        return self.data_dir / "logs"

    def _start_tansu(self, binary: Path, storage: str, env: dict[str, str], log_path: Path) -> None:
        # A port we picked ourselves may be taken between our probe and Tansu's bind: try another.
        attempts = 1 if self.requested_port else 3
        for attempt in range(1, attempts + 1):
            port = self.requested_port or free_port()
            url = f"tcp://{LOOPBACK}:{port}"
            argv = [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                storage,
            ]
            cwd = self.data_dir if self.data_dir is not None else self._scratch
            assert cwd is not None
            self._tansu = ChildProcess("tansu", argv, env=env, cwd=cwd, log_path=log_path)
            try:
                self._wait_for_kafka(self._tansu, port)
            except ChildDied as exc:
                if _BIND_FAILURE not in exc.log_tail:
                    raise
                self._tansu = None
                if attempt == attempts:
                    raise PortInUse(
                        f"port {port} on {LOOPBACK} is already in use", log_tail=exc.log_tail
                    ) from exc
            else:
                self.port = port
                return

    def _wait_for_kafka(self, child: ChildProcess, port: int) -> None:
        """Wait until Tansu accepts connections, then until it answers a metadata request."""
        deadline = time.monotonic() + self.start_timeout_s

        def check(what: str) -> None:
            code = child.exit_code()
            if code is not None:
                raise ChildDied(
                    f"tansu exited with status {code} while starting", log_tail=child.log_tail()
                )
            if time.monotonic() > deadline:
                raise StartTimeout(
                    f"tansu did not {what} within {self.start_timeout_s:.0f} s",
                    log_tail=child.log_tail(),
                )

        # A plain TCP probe first, so librdkafka does not log "connection refused" while Tansu binds.
        while not _accepts(port):
            check(f"listen on {LOOPBACK}:{port}")
            time.sleep(_POLL_INTERVAL_S)
        admin = admin_client(KafkaSettings(bootstrap_servers=f"{LOOPBACK}:{port}"), "readiness")
        while True:
            check("answer metadata requests")
            try:
                admin.list_topics(timeout=1.0)
            except KafkaException:
                time.sleep(_POLL_INTERVAL_S)
            else:
                return


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


def run_until_signalled(broker: EmbeddedBroker, on_ready: Callable[[EmbeddedBroker], None]) -> None:
    """Start `broker`, call `on_ready`, and keep it running until SIGTERM or SIGINT; then stop it.

    For the main thread of an entry point (it installs signal handlers).

    Raises:
        BrokerError: start-up failed, or a child died while running (children are stopped first).
    """
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping the embedded broker", signum)
        stop_requested.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with broker:
            on_ready(broker)
            while not stop_requested.wait(_WATCH_INTERVAL_S):
                broker.check_alive()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
