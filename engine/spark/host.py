"""The server's side of its Spark engine: a child process that runs the persistent queries. Does I/O.

`QueryEngine` follows the catalog (a watcher thread), decides which queries this server runs
(every query on a server on its own; in a cluster the caller says which), and tells the child
process (`driver.child_main`) over a pipe. The child is started only when there is a query to run,
so a node without persistent queries never pays for a JVM, unless the settings ask for Spark at
startup (``start_at_startup``: the child then starts at once and warms Spark up in the background). Statuses come back twice a second;
until a query has reported it is PENDING (Spark starting). The child is stopped by its process id
(and its process group: the JVM and Spark's Python workers) when the server stops, and it stops by
itself when the server dies (its pipe closes).

This module does not import pyspark: the server's process never loads Spark.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.engine.functions.catalog import called_functions, unknown_names
from headwater.engine.functions.extensions import payload as extension_payload
from headwater.engine.persistent.aggregate_run import is_aggregate_statement
from headwater.engine.persistent.query_run import parse_persistent
from headwater.engine.spark.settings import EngineSettings
from headwater.kafka.clients import KafkaSettings
from headwater.metastore.catalog import Catalog, Query, SourceKind
from headwater.metastore.codec import catalog_to_dict, start_offsets_to_dict

log = logging.getLogger(__name__)

_WATCH_INTERVAL_S = 0.2
_STOP_GRACE_S = 20.0


def missing_functions(query: Query) -> list[str]:
    """The functions ``query`` calls that this server has neither built in nor loaded."""
    return unknown_names(_called_functions(query.statement_text))


@functools.lru_cache(maxsize=1024)
def _called_functions(statement_text: str) -> frozenset[str]:
    """The functions a persistent query's statement calls, parsed once per text: the watcher asks
    five times a second for every query (parsing them all each time was 1.4% of a core with 10
    idle queries, half the server's idle CPU)."""
    select, _sink = parse_persistent(statement_text)
    return frozenset(called_functions(select))


def query_payload(query: Query, catalog: Catalog) -> dict[str, Any]:
    """What the driver needs to run ``query``: the query and the catalog objects it reads (plain
    JSON, so it crosses process boundaries and is equal when nothing relevant changed)."""
    names = [*query.sources, *([query.sink] if query.sink else [])]
    sources = {n: catalog.sources[n] for n in names if n in catalog.sources}
    small = Catalog(sources=sources, types=catalog.types, queries={query.id: query})
    body = catalog_to_dict(small)
    body["lastOffset"] = -1
    source = catalog.sources[query.sources[0]]
    sink = catalog.sources[query.sink] if query.sink else None
    leaves = [catalog.sources[n] for n in query.sources if n in catalog.sources]
    payload: dict[str, Any] = {
        "catalog": body,
        "join": len(query.sources) > 1,
        "leaves": [{"topic": s.topic, "partitions": s.partitions} for s in leaves],
        "aggregate": is_aggregate_statement(query.statement_text),
        "tableSource": all(s.kind is SourceKind.TABLE for s in leaves),
        "windowed": bool(sink is not None and sink.windowed and source.windowed is None),
        "source": {"topic": source.topic, "partitions": source.partitions},
        "sink": {"topic": sink.topic if sink else "", "partitions": sink.partitions if sink else 1},
    }
    if query.start_offsets:  # where it reads until it has a checkpoint (other topics: from 0)
        payload["startingOffsets"] = start_offsets_to_dict(query.start_offsets)
    extensions = extension_payload()
    if extensions:  # the Python functions' modules: Spark's workers load them from here
        payload["catalog"]["extensions"] = extensions
    return payload


@dataclass(frozen=True, slots=True)
class EngineHealth:
    """The Spark child process as the server sees it (``/metrics``).

    Attributes:
        state: DOWN, STARTING (its SparkSession starts) or UP.
        pid: its process id (None: no child).
        started_at: when it was spawned (Unix time; None: no child).
    """

    state: str
    pid: int | None
    started_at: float | None


class QueryEngine:
    """Runs this server's share of the persistent queries in a Spark child process."""

    def __init__(
        self,
        settings: EngineSettings,
        kafka: KafkaSettings,
        catalog: Callable[[], Catalog],
        owned: Callable[[Catalog], set[str]] | None = None,
    ) -> None:
        """
        Args:
            settings: the engine's settings.
            kafka: how the queries reach Kafka.
            catalog: the current catalog (the command runner's).
            owned: which of the catalog's queries this server runs (default: all of them).
        """
        self.settings = settings
        self._kafka = kafka
        self._catalog = catalog
        self._owned = owned or owned_everything
        self._lock = threading.Lock()
        self._process: Any = None
        self._spawned_at: float | None = None
        self._conn: Any = None
        self._statuses: dict[str, dict[str, Any]] = {}
        self._spark_state = "DOWN"
        self._sent: dict[str, Any] | None = None
        self._payloads: dict[str, dict[str, Any]] = {}
        self._transient: dict[str, dict[str, Any]] = {}  # push queries with state
        self._refused: dict[str, str] = {}  # query id -> why this server cannot run it
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Follow the catalog from now on (the child starts with the first query to run)."""
        self._watcher = threading.Thread(target=self._watch, name="query-engine", daemon=True)
        self._watcher.start()

    def statuses(self) -> dict[str, dict[str, Any]]:
        """Query id -> status of the queries this server runs (PENDING until the child reports)."""
        with self._lock:
            sent = dict(self._sent or {})
            found = {
                q: dict(
                    self._statuses.get(q)
                    or {
                        "state": "PENDING",
                        "message": "waiting for Spark to start"
                        if self._spark_state != "UP"
                        else "",
                    }
                )
                for q in sent
            }
            for query_id, message in self._refused.items():
                found[query_id] = {"state": "ERROR", "message": message}
        return found

    def health(self) -> EngineHealth:
        """The Spark child's state, process id and start time."""
        with self._lock:
            process = self._process
            if process is None:
                return EngineHealth("DOWN", None, None)
            return EngineHealth(self._spark_state, process.pid, self._spawned_at)

    def run_transient(self, query_id: str, payload: dict[str, Any]) -> None:
        """Runs a transient query (a push query's) beside the catalog's, until `stop_transient`."""
        with self._lock:
            self._transient[query_id] = payload

    def stop_transient(self, query_id: str) -> None:
        """Stops a transient query; its checkpoint is deleted once it has stopped."""
        with self._lock:
            self._transient.pop(query_id, None)

    def wait_stopped(self, query_id: str, timeout_s: float) -> bool:
        """Waits until the child no longer reports ``query_id`` (True) or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                gone = query_id not in (self._sent or {}) and query_id not in self._statuses
            if gone:
                return True
            time.sleep(0.2)
        return False

    @property
    def spark_state(self) -> str:
        """DOWN (no child), STARTING or UP."""
        return self._spark_state

    def _sync(self) -> None:
        """Follow the catalog once. Only the watcher thread calls it: the child asks the kernel to
        stop it when the thread that started it ends (PR_SET_PDEATHSIG follows threads)."""
        catalog = self._catalog()
        owned = self._owned(catalog)
        for query_id in set(self._payloads) - set(catalog.queries):
            del self._payloads[query_id]
        wanted: dict[str, Any] = {}
        refused: dict[str, str] = {}
        for query_id in sorted(owned & set(catalog.queries)):
            missing = missing_functions(catalog.queries[query_id])
            if missing:  # planned where they were loaded: refused here, by name, not crashed
                refused[query_id] = (
                    f"this server cannot run query {query_id}: it calls "
                    f"{', '.join(missing)}, which this server's extension folder "
                    "(ksql.extension.dir) does not declare. Add the module there and restart "
                    "the server; the query then resumes from its checkpoint."
                )
                continue
            payload = self._payloads.get(query_id)
            if payload is None:  # once per query: what it needs cannot change while it exists
                payload = self._payloads[query_id] = query_payload(
                    catalog.queries[query_id], catalog
                )
            wanted[query_id] = payload
        with self._lock:
            for query_id, message in refused.items():
                if self._refused.get(query_id) != message:
                    log.error("%s", message)
            self._refused = refused
            wanted.update(self._transient)
            if self._process is not None and not self._process.is_alive():
                # The child died (killed, out of memory): its queries resume from their
                # checkpoints in a new one, as after a restart of the server.
                log.error(
                    "the Spark engine process %d died (exit code %s); starting a new one",
                    self._process.pid,
                    self._process.exitcode,
                )
                if self._conn is not None:
                    self._conn.close()
                _kill_group(self._process.pid)  # what it left: its JVM, its Python workers
                self._process = self._conn = None
                self._sent = None
                self._statuses = {}
                self._spark_state = "DOWN"
            if wanted == self._sent:
                return
            # Terminated (gone from the catalog) rather than moved: the server that ran it
            # deletes its checkpoint once it has stopped.
            terminated = sorted(set(self._sent or {}) - set(catalog.queries) - set(wanted))
            if (wanted or self.settings.start_at_startup) and self._process is None:
                self._spawn()
            if self._conn is not None:
                self._conn.send(
                    {
                        "op": "sync",
                        "queries": wanted,
                        "terminated": terminated,
                        "transient": sorted(self._transient),
                    }
                )
            self._sent = wanted

    def close(self) -> None:
        """Stop the queries (checkpoints stay) and the child, by its process id."""
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(5)
        with self._lock:
            process, conn = self._process, self._conn
            idle = not self._sent and self._spark_state != "UP"
            self._process = self._conn = None
        if process is None:
            return
        if idle:  # Spark still starting, no query to stop: nothing to wait for
            _kill_group(process.pid)
        try:
            conn.send({"op": "stop"})
        except (OSError, ValueError):
            pass
        process.join(_STOP_GRACE_S)
        _kill_group(process.pid)
        process.join(5)
        conn.close()
        if self._reader is not None:
            self._reader.join(2)

    def _spawn(self) -> None:
        from headwater.engine.spark.driver import child_main

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(
            target=child_main,
            name="headwater-spark",
            args=(
                child,
                self.settings,
                self._kafka.bootstrap_servers,
                dict(self._kafka.client_config),
            ),
            daemon=False,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        self._spawned_at = time.time()
        self._spark_state = "STARTING"
        self._reader = threading.Thread(
            target=self._read, args=(parent,), name="query-status", daemon=True
        )
        self._reader.start()
        log.info(
            "started the Spark engine process %d (logs: %s)",
            process.pid,
            self.settings.log_file or "stderr",
        )

    def _read(self, conn: Any) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                self._spark_state = "DOWN"
                return
            if message.get("op") == "status":
                with self._lock:
                    self._statuses = dict(message.get("queries", {}))
                    self._spark_state = str(message.get("spark", self._spark_state))

    def _watch(self) -> None:
        if self.settings.start_at_startup:
            with self._lock:
                if self._process is None:
                    self._spawn()
        while not self._stopping.wait(_WATCH_INTERVAL_S):
            try:
                self._sync()
            except Exception:
                log.exception("could not follow the catalog's persistent queries")


def _kill_group(pid: int | None) -> None:
    """SIGKILL the child's process group (the JVM and Python workers run in it), if it is left."""
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


def owned_everything(catalog: Catalog) -> set[str]:
    """A server on its own runs every query."""
    return set(catalog.queries)
