"""The Spark driver of a server: one SparkSession, the persistent queries this server runs. Does I/O.

It runs in a child process of the server (see `host.py`), so Spark's driver-side Python (the
``foreachBatch`` sinks, py4j callbacks) never shares the HTTP server's GIL; `QueryDriver` is also
usable in-process (tests share one session that way). The session starts on the first query.

A query is started from its `QueryPayload` (plain JSON: the query and the catalog objects it needs)
as ``readStream`` over the `kafka_source` (which runs the query's operators in the Spark tasks)
into an `ExactlyOnceSink`, with its checkpoint under the checkpoint root, so a restart or a new
owner resumes where the last one stopped. A query Spark has started is PENDING until Spark has
finished its first trigger (on a loaded machine that took 70 s: its sources connect, the checkpoint
is read), then RUNNING with the offsets its last committed micro-batch read to (``processed``). A
query that fails is reported as ERROR with the reason and started again after a growing pause (5 s,
doubling to 60 s), as ksqlDB retries failed queries.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.engine import log_format
from headwater.engine.spark import runner_forks
from headwater.engine.spark.admission import admit, available_mb, creation_order
from headwater.engine.spark.query_events import QueryEvents, listen
from headwater.engine.spark.runner_forks import RunnerForks
from headwater.engine.spark.settings import EngineSettings
from headwater.engine.spark.shared_ends import EndWatch
from headwater.kafka.clients import KafkaSettings

log = logging.getLogger(__name__)

_RETRY_FIRST_S = 5.0
_RETRY_MAX_S = 60.0
# How long the child may take to stop its queries and Spark once it is leaving (told to, or its
# server died) before it kills its own process group: a stop that hangs (a micro-batch stuck on an
# unreachable broker) must not leave a JVM and Python workers behind a dead server.
_EXIT_GRACE_S = 20.0
_STATUS_EVERY_S = 0.5  # how often the child looks at its queries and tells the server
_BUSY_EVERY_S = 0.2  # as often while a query waits to start or is starting
#: How long an idle single-source query's source holds Spark's question for new records (a
#: TERMINATE of an idle query waits up to this much longer).
IDLE_WAIT_MS = 1000  # 500 before: 10 idle queries then cost ~0.5% of a core more (JVM and runners)
_WARM_UP_STATEFUL_S = 60.0  # the longest the background warm-up's stateful batch may take
_TRACEBACK = "Traceback (most recent call last):"
#: The longest a query counts as starting (its sources connecting) for `admission`.
_STARTING_MAX_S = 60.0


@dataclass
class _Running:
    payload: Mapping[str, Any]
    handle: Any = None  # pyspark StreamingQuery
    run_id: str = ""  # Spark's id of the handle's run (what its listener events name)
    sink: Any = None  # ExactlyOnceSink
    state: str = "PENDING"
    message: str = ""
    retry_at: float = 0.0
    retry_pause: float = _RETRY_FIRST_S
    started_ms: int = 0
    restarts: int = 0
    starting_until: float = 0.0  # while Spark initializes its sources (see `_starting`)
    progressed: bool = False  # Spark has finished a trigger of this run (see `_processed`)
    processed: dict[str, dict[str, int]] = field(default_factory=dict)
    batch_ms: int | None = None  # Spark's triggerExecution of the last micro-batch
    extra: dict[str, Any] = field(default_factory=dict)


class QueryDriver:
    """Runs the persistent queries it is told to run, on one lazily started SparkSession."""

    def __init__(self, settings: EngineSettings, kafka: KafkaSettings) -> None:
        self.settings = settings
        self.kafka = kafka
        self._spark: Any = None
        self._queries: dict[str, _Running] = {}
        self._transient: frozenset[str] = frozenset()
        self._ends: EndWatch | None = None  # started with the first query (`shared_ends`)
        # Spark's events of the queries (`query_events`); None: asked of each handle instead
        self._events: QueryEvents | None = None

    @property
    def spark(self) -> Any:
        """The SparkSession (started on first use: ~11 s cold)."""
        if self._spark is None:
            self._spark = start_session(self.settings)
            self._events = _listened(self._spark)
        return self._spark

    def sync(
        self, wanted: Mapping[str, Mapping[str, Any]], transient: Collection[str] = ()
    ) -> None:
        """Run exactly the queries of ``wanted`` (query id -> payload), as far as `admission`
        lets: the others wait, PENDING with the reason. ``transient``: which are push queries."""
        for query_id in sorted(set(self._queries) - set(wanted)):
            self._stop(query_id)
            del self._queries[query_id]
        self._transient = frozenset(transient)
        for query_id, payload in wanted.items():
            running = self._queries.get(query_id)
            if running is None or running.payload != payload:
                if running is not None:
                    self._stop(query_id)
                self._queries[query_id] = _Running(dict(payload))
        self._follow_ends()
        self._admit()

    def _follow_ends(self, start: bool = False) -> None:
        """The end watcher follows the source topics of exactly the wanted queries; ``start``: a
        query starts, so start the watcher if there is none (otherwise none is started: a driver
        whose queries never start holds no consumer)."""
        topics: dict[str, int] = {}
        for running in self._queries.values():
            payload = running.payload
            for leaf in payload.get("leaves") or [payload.get("source") or {}]:
                if leaf.get("topic"):
                    topics[str(leaf["topic"])] = int(leaf["partitions"])
        if self._ends is None:
            if not topics or not start:
                return
            folder = Path(tempfile.mkdtemp(prefix="headwater-ends-"))
            self._ends = EndWatch(self.kafka, folder / "ends.json")
        self._ends.follow(topics)

    def _admit(self) -> None:
        """Start the waiting queries that `admission.admit` lets start now."""
        waiting = sorted(
            (q for q, r in self._queries.items() if r.state == "PENDING"), key=creation_order
        )
        if not waiting:
            return
        running = [q for q, r in self._queries.items() if r.state != "PENDING"]
        decided = admit(
            waiting,
            running,
            self._transient,
            self.settings.max_queries,
            _available_mb(),
            self.settings.query_memory_mb,
            self.settings.memory_reserve_mb,
            self._starting(),
            self.settings.max_starting_queries,
        )
        for query_id, why in decided.waiting.items():
            if not self._queries[query_id].message:  # once, when it starts waiting
                log.warning("query %s %s", query_id, why, extra={"query_id": query_id})
            self._queries[query_id].message = why
        for query_id in decided.start:
            self._start(query_id)

    def forget(self, query_ids: Any) -> None:
        """Delete the checkpoints of terminated queries (after `sync` stopped them)."""
        for query_id in query_ids:
            if query_id in self._queries:
                continue  # still wanted: never delete a running query's checkpoint
            path = self.settings.checkpoint_of(query_id)
            if "://" not in path:  # a local or mounted folder; remote stores keep theirs
                shutil.rmtree(path, ignore_errors=True)
                log.info("query %s terminated: checkpoint %s deleted", query_id, path)

    def pending(self) -> bool:
        """Whether a query waits to start or is starting (asks nothing of Spark): the child then
        checks often, so that the next one starts as soon as it may."""
        now = time.monotonic()
        return any(r.state == "PENDING" or r.starting_until > now for r in self._queries.values())

    def check(self) -> None:
        """Notice queries that died; start them again when their pause is over; start waiting
        queries that can start now."""
        self._admit()
        now = time.monotonic()
        for query_id, running in self._queries.items():
            handle = running.handle
            if handle is not None and self._ended(running):
                error = handle.exception()
                running.state = "ERROR"
                running.message = _reason(error) if error else "the query stopped"
                log.error(
                    "query %s failed: %s",
                    query_id,
                    running.message,
                    extra={"query_id": query_id},
                )
                self._let_go(running)
                running.retry_at = now + running.retry_pause
                running.retry_pause = min(running.retry_pause * 2, _RETRY_MAX_S)
            elif (
                handle is None
                and running.state == "ERROR"
                and now >= running.retry_at
                and self._starting() < self.settings.max_starting_queries
            ):
                running.restarts += 1
                self._start(query_id)

    def _starting(self) -> int:
        """How many queries are still starting: Spark says "Initializing ..." (their sources
        connect), for at most `_STARTING_MAX_S` after their start."""
        now = time.monotonic()
        count = 0
        for running in self._queries.values():
            if running.handle is None or running.starting_until <= now:
                running.starting_until = 0.0
                continue
            try:
                message = str((running.handle.status or {}).get("message", ""))
            except Exception:  # py4j: the query is going away
                log.debug("no status of a starting query", exc_info=True)
                message = ""
            if message.startswith("Initializing"):
                count += 1
            else:
                running.starting_until = 0.0
        return count

    def statuses(self) -> dict[str, dict[str, Any]]:
        """Query id -> state, reason, and what its sink did (for SHOW QUERIES, DESCRIBE EXTENDED)."""
        found: dict[str, dict[str, Any]] = {}
        ends = self._ends.ends() if self._ends is not None else {}
        for query_id, running in self._queries.items():
            stats = running.sink.stats if running.sink is not None else None
            message = running.message
            if running.state == "ERROR" and not message.strip():  # never an error without a text
                message = (
                    f"the query failed without a reason (see {self.settings.log_file or 'the log'})"
                )
            state = running.state
            if state == "RUNNING" and running.handle is not None and not self._processed(running):
                # started, but Spark has not finished a trigger yet (its sources connect, the
                # checkpoint is read): nothing it wrote can be trusted to be current
                state, message = "PENDING", _STARTING_MESSAGE
            status = {
                "state": state,
                "message": message,
                "restarts": running.restarts,
                "startedMs": running.started_ms,
            }
            if state == "RUNNING":
                status["processed"] = {t: dict(p) for t, p in running.processed.items()}
                # the sources' ends as the end watcher last saw them (``/metrics``' lag)
                status["ends"] = {
                    t: {str(p): e for p, e in ends[t].items()}
                    for t in running.processed
                    if t in ends
                }
                if self._ends is not None:  # ``/metrics``' event-time lag (`EndWatch.time_lags`)
                    status["lagMs"] = self._ends.time_lags(running.processed)
                if running.batch_ms is not None:
                    status["lastBatchMs"] = running.batch_ms
            if stats is not None:
                with stats.lock:
                    status.update(
                        records=stats.records,
                        batches=stats.batches,
                        errors=stats.errors,
                        lastError=stats.last_error,
                        lastErrorMs=stats.last_error_time_ms,
                        replayedSkipped=stats.skipped_replayed,
                        rewritten=stats.rewritten,
                    )
            found[query_id] = status
        return found

    def _ended(self, running: _Running) -> bool:
        """Whether the query's current run has ended (Spark's event, or asked of its handle where
        no listener could be registered)."""
        if self._events is not None and running.run_id:
            return self._events.ended(running.run_id)
        return not running.handle.isActive

    def _processed(self, running: _Running) -> bool:
        """Whether Spark has finished a trigger of the query's current run; keeps
        ``running.processed`` (topic -> {partition: next offset}) at what its last committed
        micro-batch read (Spark's progress: each source's end offset)."""
        try:
            if self._events is not None and running.run_id:
                if self._events.idled(running.run_id):
                    # an idle trigger updates the handle's progress, but its event carries none
                    asked = running.handle.lastProgress
                    if asked is not None:
                        self._events.keep_progress(running.run_id, asked)
                progress = self._events.progress(running.run_id)
            else:
                progress = running.handle.lastProgress
        except Exception:  # py4j: the query is going away
            log.debug("no progress of query", exc_info=True)
            return running.progressed
        if progress is None:
            return running.progressed
        running.progressed = True
        running.processed = processed_offsets(running.payload, progress)
        durations = progress.get("durationMs") if isinstance(progress, Mapping) else None
        if isinstance(durations, Mapping) and isinstance(durations.get("triggerExecution"), int):
            running.batch_ms = durations["triggerExecution"]
        return True

    def warm_up(self) -> None:
        """Start the session and the Python workers a query's first micro-batch runs on, with the
        query modules imported in them (`headwater.engine.spark.settings`'s ``start_at_startup``).
        A failure is logged, never raised: the first query then starts Spark as it would have."""
        started = time.monotonic()
        try:
            spark = self.spark
            up = time.monotonic() - started
            spark.range(0, 2, 1, 2).mapInArrow(_import_query_modules, "id long").collect()
            # and Spark's first look at the Kafka source (its Python planner processes), which
            # the first query's readStream paid: ~2.4 s
            from headwater.engine.spark.kafka_source import NAME

            spark.readStream.format(NAME).option("topic", "-").option("partitions", "1").option(
                "bootstrap.servers", self.kafka.bootstrap_servers
            ).load()
        except Exception:
            log.exception("warming up Spark failed; the first query will start it")
            return
        log.info(
            "Spark is up in %.1f s, its Python workers warm in %.1f s more",
            up,
            time.monotonic() - started - up,
        )
        # A first aggregation's first batch loads the state store, the stateful operators and
        # their Python worker: ~8 s more than a later one's (bench: a GROUP BY's first output
        # 18.9 s with Spark up, 11.3 s after this). One small batch pays it, in the background:
        # queries start meanwhile (a stateless one does not need it).
        threading.Thread(
            target=self._warm_up_stateful, args=(spark,), name="warm-up-stateful", daemon=True
        ).start()

    def _warm_up_stateful(self, spark: Any) -> None:
        from headwater.engine.spark.aggregation import warm_up_stateful

        began = time.monotonic()
        folder = tempfile.mkdtemp(prefix="headwater-warm-up-")
        try:
            done = warm_up_stateful(spark, folder, _WARM_UP_STATEFUL_S)
        except Exception:  # Spark stopping meanwhile, or a failure: the first aggregation pays
            log.warning("warming up Spark's stateful operators failed", exc_info=True)
            return
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        log.info(
            "Spark's stateful operators %s in %.1f s",
            "warm" if done else "not warm yet",
            time.monotonic() - began,
        )

    def stop_all(self) -> None:
        """Stop every query (their checkpoints stay) and the session."""
        for query_id in list(self._queries):
            self._stop(query_id)
        self._queries.clear()
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
            self._events = None
            stop_runner_forks()
        if self._ends is not None:
            self._ends.close()
            shutil.rmtree(self._ends.path.parent, ignore_errors=True)
            self._ends = None

    def _start(self, query_id: str) -> None:
        from headwater.engine.spark.aggregation import aggregate_frame, state_layout
        from headwater.engine.spark.sink import ExactlyOnceSink

        running = self._queries[query_id]
        payload = running.payload
        self._follow_ends(start=True)
        try:
            spark = self.spark
            source, sink = payload["source"], payload["sink"]
            spark.conf.set("spark.sql.shuffle.partitions", str(max(1, int(source["partitions"]))))
            aggregate = bool(payload.get("aggregate"))
            starts = payload.get("startingOffsets") or {}  # topic -> offsets: where it starts
            checkpoint = self.settings.checkpoint_of(query_id)
            query_json = json.dumps(
                {
                    "queryId": query_id,
                    "catalog": payload["catalog"],
                    "buffering": self.settings.buffering,
                    "stateBuckets": (
                        state_layout(checkpoint) if aggregate and not payload.get("windowed") else 0
                    ),
                },
                sort_keys=True,
            )
            if payload.get("join"):
                from headwater.engine.spark.joins import join_frame

                entries = [
                    self._read(
                        spark,
                        leaf["topic"],
                        int(leaf["partitions"]),
                        query_id,
                        query_json,
                        "join",
                        leaf=index,
                        start=starts.get(leaf["topic"]),
                        # Spark asks a query's sources one after the other: one holding its
                        # answer would hold up records that arrive on the other
                        idle_wait_ms=0,
                    )
                    for index, leaf in enumerate(payload["leaves"])
                ]
                frame = join_frame(entries, query_json, aggregate)
            else:
                frame = self._read(
                    spark,
                    source["topic"],
                    int(source["partitions"]),
                    query_id,
                    query_json,
                    "grouped" if aggregate else "records",
                    start=starts.get(source["topic"]),
                )
            if aggregate:
                frame = aggregate_frame(
                    frame,
                    query_json,
                    bool(payload.get("tableSource")),
                    bool(payload.get("windowed")),
                )
            target = ExactlyOnceSink(
                self.kafka,
                query_id,
                sink["topic"],
                int(sink["partitions"]),
                self.settings.processing_log_topic,
            )
            writer = (
                frame.writeStream.queryName(query_id)
                .foreachBatch(target)
                .option("checkpointLocation", checkpoint)
            )
            if self.settings.trigger_interval_ms > 0:
                writer = writer.trigger(
                    processingTime=f"{self.settings.trigger_interval_ms} milliseconds"
                )
            running.progressed, running.processed = False, {}
            running.handle = writer.start()
            running.run_id = str(running.handle.runId) if self._events is not None else ""
            running.starting_until = time.monotonic() + _STARTING_MAX_S
            running.sink = target
            running.state = "RUNNING"
            running.message = ""
            running.started_ms = int(time.time() * 1000)
        except Exception as exc:
            running.state = "ERROR"
            running.message = _reason(exc)
            running.retry_at = time.monotonic() + running.retry_pause
            running.retry_pause = min(running.retry_pause * 2, _RETRY_MAX_S)
            log.exception("query %s could not start", query_id, extra={"query_id": query_id})

    def _read(
        self,
        spark: Any,
        topic: str,
        partitions: int,
        query_id: str,
        query_json: str,
        output: str,
        leaf: int = 0,
        start: dict[str, int] | None = None,
        idle_wait_ms: int = IDLE_WAIT_MS,
    ) -> Any:
        """The streaming DataFrame of one source topic, run through the query's first stage;
        ``idle_wait_ms``: how long the source may hold Spark's question for new records while
        none arrive (`kafka_source`)."""
        from headwater.engine.spark.kafka_source import NAME

        return (
            spark.readStream.format(NAME)
            .option("bootstrap.servers", self.kafka.bootstrap_servers)
            .option("kafka.config", json.dumps(dict(self.kafka.client_config)))
            .option("topic", topic)
            .option("partitions", str(partitions))
            .option("maxRecordsPerBatch", str(self.settings.max_records_per_batch))
            .option("queryId", query_id)
            .option("query", query_json)
            .option("output", output)
            .option("leaf", str(leaf))
            .option("startingOffsets", json.dumps(start or {}))
            .option("endsFile", str(self._ends.path) if self._ends is not None else "")
            .option("idleWaitMs", str(idle_wait_ms))
            .load()
        )

    def _stop(self, query_id: str) -> None:
        running = self._queries.get(query_id)
        if running is None:
            return
        if running.handle is not None:
            try:
                running.handle.stop()
            except Exception:
                log.exception("query %s did not stop cleanly", query_id)
        if running.sink is not None:
            running.sink.close()
        self._let_go(running)

    def _let_go(self, running: _Running) -> None:
        """Forget the query's run: its handle, and what Spark's events said of it."""
        running.handle = None
        if self._events is not None and running.run_id:
            self._events.forget(running.run_id)
        running.run_id = ""


_STARTING_MESSAGE = (
    "starting: Spark has not finished the query's first micro-batch yet (its "
    "sources connect, its checkpoint is read); what it writes is not current"
)


def processed_offsets(payload: Mapping[str, Any], progress: Any) -> dict[str, dict[str, int]]:
    """topic -> {partition: next offset} that the query's last committed micro-batch read to: the
    end offsets of each source in Spark's ``progress`` (``kafka_source``'s offsets), by the
    payload's source topics in order (a join's leaves; a topic read twice: the lesser offset)."""
    topics = (
        [str(leaf["topic"]) for leaf in payload.get("leaves") or ()]
        if payload.get("join")
        else [str(payload["source"]["topic"])]
    )
    sources = list(progress["sources"] or ())
    found: dict[str, dict[str, int]] = {}
    for topic, source in zip(topics, sources, strict=False):
        end = source["endOffset"]
        offsets = json.loads(end) if isinstance(end, str) else end
        if not isinstance(offsets, Mapping):
            continue
        mine = found.setdefault(topic, {})
        for partition, offset in offsets.items():
            mine[str(partition)] = min(int(offset), mine.get(str(partition), int(offset)))
    return found


def _available_mb() -> int | None:
    """The node's available memory (MemAvailable), or None where /proc/meminfo is not."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            return available_mb(meminfo.read())
    except OSError:
        return None


def _reason(error: Any) -> str:
    """What a failed query reports: the Python exception its description carries (an error raised
    in the sink reaches us wrapped in Spark's, whose first line only says a user function failed),
    else the description's first line."""
    text = (getattr(error, "desc", None) or getattr(error, "_desc", None) or _text(error)).strip()
    if not text:  # a Java exception without a message (a timeout, an interrupt): its class
        trace = str(getattr(error, "_stackTrace", None) or "").strip()
        return (
            f"{type(error).__name__}: {trace.splitlines()[0][:500]}"
            if trace
            else type(error).__name__
        )
    lines = text.splitlines()
    raised = [i for i, line in enumerate(lines) if line.strip().endswith(_TRACEBACK)]
    if raised:
        # the exception line: the first one after the frames (indented) of the last traceback
        after = (line for line in lines[raised[-1] + 1 :] if line and not line[0].isspace())
        found = next(after, None)
        if found:
            return found.strip()[:500]
    return lines[0][:500]


def _text(error: Any) -> str:
    """``str(error)``, or "" when even that fails (pyspark's exceptions ask the JVM, which may be
    gone)."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - any failure to describe it: the caller names its type
        return ""


def _import_query_modules(batches: Any) -> Any:
    """In a Python worker: import what a query's tasks import (pure Python, compiled on first use:
    about 1.5 s of a worker's first task), then pass the batches on."""
    import headwater.engine.spark.kafka_source
    import headwater.engine.spark.source_rows  # noqa: F401

    yield from batches


_FORKS: RunnerForks | None = None  # this process's source runners' fork server, once started


def _worker_python(settings: EngineSettings) -> str:
    """The interpreter Spark runs its Python with: the wrapper of this process's `runner_forks`
    server (started now if it is not running), or this interpreter when the settings say so or
    the server cannot start (a warning: every query source then costs a whole runner)."""
    global _FORKS
    if not settings.forked_source_runners:
        return sys.executable
    if _FORKS is None or not _FORKS.alive():
        if _FORKS is not None:
            _FORKS.close()
        try:
            _FORKS = runner_forks.start()
        except (RuntimeError, OSError):
            log.warning("source runners start unforked: their fork server failed", exc_info=True)
            _FORKS = None
            return sys.executable
    return _FORKS.python


def stop_runner_forks() -> None:
    """Stop this process's source runners' fork server (after Spark: its runners end with their
    JVM's sockets)."""
    global _FORKS
    if _FORKS is not None:
        _FORKS.close()
        _FORKS = None


def start_session(settings: EngineSettings) -> Any:
    """A SparkSession for persistent queries, with headwater's Kafka source registered."""
    python = _worker_python(settings)
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from headwater.engine.spark.kafka_source import KafkaDataSource

    builder = SparkSession.builder
    for key, value in settings.spark_conf(python).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet(spark, QUIETED_LOGGERS)
    spark.dataSource.register(KafkaDataSource)
    return spark


def _listened(spark: Any) -> QueryEvents | None:
    """Spark's query events, followed from now on (`query_events`); None when no listener could
    be registered (logged): the driver then asks each query's handle, as it did before."""
    events = QueryEvents()
    try:
        listen(spark, events)
    except Exception:
        log.warning("could not listen to Spark's query events; asking each query", exc_info=True)
        return None
    return events


#: Spark's loggers that would fill its log with what is expected here, and so are kept to errors:
#: an idle query's source holds Spark's question for new records up to 1 s (`kafka_source`), so
#: every idle trigger "falls behind" the 100 ms trigger interval (a warning every second per
#: idle query: ~86,000 lines a day each).
QUIETED_LOGGERS = ("org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",)


def _quiet(spark: Any, loggers: Collection[str]) -> None:
    """Keep ``loggers`` to errors (log4j2, through py4j); a failure is logged, never raised."""
    try:
        jvm = spark.sparkContext._jvm
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in loggers:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)
    except Exception:  # a noisier log is no reason to fail the engine
        log.warning("could not quiet Spark's loggers %s", loggers, exc_info=True)


# -- the child process --------------------------------------------------------------------------


def _die_with_parent() -> None:
    """SIGTERM (a graceful stop of the queries) when the server dies, on Linux; at once if it has
    died already (while this process was starting: then the parent is no longer the server)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import ctypes.util
    import multiprocessing

    libc = ctypes.util.find_library("c")
    if libc is None:
        return
    server = multiprocessing.parent_process()
    ctypes.CDLL(libc, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    if server is not None and os.getppid() != server.pid:
        os.kill(os.getpid(), signal.SIGTERM)


def kill_group_after(seconds: float) -> threading.Thread:
    """SIGKILL this process's group (itself, Spark's JVM and Python workers) in `seconds` unless
    the process has exited by then: the bound on a graceful stop. Call it in a group leader."""

    def expire() -> None:
        time.sleep(seconds)
        log.error("stopping took longer than %.0f s; killing the Spark engine's processes", seconds)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    watchdog = threading.Thread(target=expire, name="exit-watchdog", daemon=True)
    watchdog.start()
    return watchdog


def child_main(
    conn: Any, settings: EngineSettings, bootstrap: str, client_config: Mapping[str, Any]
) -> None:
    """Entry point of the engine's child process: follow the server's instructions on ``conn``.

    Messages in: ``{"op": "sync", "queries": {id: payload}}``, ``{"op": "stop"}``. Out:
    ``{"op": "status", "queries": {id: status}, "spark": "STARTING"|"UP"|"DOWN"}`` twice a second.
    Stops its queries and exits when told or when the server is gone (the pipe closes).
    """
    os.setsid()  # a Ctrl-C in the server's terminal is the server's to handle
    _die_with_parent()
    if settings.log_file:
        fd = os.open(settings.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    log_format.configure(settings.log_format, logging.INFO)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    driver = QueryDriver(settings, KafkaSettings(bootstrap, client_config=dict(client_config)))
    last_sent = last_checked = 0.0
    try:
        if settings.start_at_startup:
            conn.send({"op": "status", "spark": "STARTING", "queries": {}})
            driver.warm_up()
        while True:
            # a message wakes it at once; otherwise it looks at the queries twice a second (each
            # look asks Spark's JVM about every query: at five a second that was 1% of a core for
            # ten idle queries)
            if conn.poll(_BUSY_EVERY_S if driver.pending() else _STATUS_EVERY_S):
                message = conn.recv()
                if message.get("op") == "stop":
                    break
                if message.get("op") == "sync":
                    wanted = message.get("queries", {})
                    if wanted and driver._spark is None:
                        conn.send(
                            {"op": "status", "spark": "STARTING", "queries": driver.statuses()}
                        )
                    driver.sync(wanted, message.get("transient", ()))
                    driver.forget(message.get("terminated", ()))
            every = _BUSY_EVERY_S if driver.pending() else _STATUS_EVERY_S
            if time.monotonic() - last_checked >= every:
                driver.check()
                last_checked = time.monotonic()
            if time.monotonic() - last_sent >= _STATUS_EVERY_S:
                conn.send(
                    {
                        "op": "status",
                        "spark": "UP" if driver._spark else "DOWN",
                        "queries": driver.statuses(),
                    }
                )
                last_sent = time.monotonic()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        log.info("the server is gone; stopping its queries")
    finally:
        kill_group_after(_EXIT_GRACE_S)
        driver.stop_all()
