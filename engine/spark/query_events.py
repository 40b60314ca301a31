"""What Spark's listener bus tells of the driver's streaming queries: each run's latest progress,
and whether it has ended. Spark pushes it; the JVM is asked only for an idle query's progress, at
most every 10 s.

Before, the Spark child asked the JVM about every query twice a second (``isActive`` and
``lastProgress``: two py4j calls and a JSON parse each): 40 calls a second for ten idle queries
(bench.persistent_queries' idle profile), more with every query. Spark's
``StreamingQueryListener`` instead calls the driver when a micro-batch finished (and every 10 s of
an idle query, Spark's ``noDataProgressEventInterval``: an idle event, after which the driver
asks the query's handle for its progress once) and when a query ends, so an idle query costs
nothing between events.

`QueryEvents` is the pure part (fed the events' JSON, tested directly); `_Listener` is the py4j
proxy Spark calls (one call back into the JVM per event: the event's ``json()``); `listen`
registers it with a session.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["QueryEvents", "listen"]

log = logging.getLogger(__name__)

#: Spark's Java interface for a listener written in Python (what pyspark's own listeners implement).
_JAVA_LISTENER = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
#: How many forgotten runs are remembered, so that their late events (Spark's bus is asynchronous:
#: a stopped run's end arrives after the driver let it go) are dropped rather than kept for good.
_GONE_KEPT = 1024


class QueryEvents:
    """The latest progress and the end of each query run (Spark's run id), from Spark's events.

    Thread-safe: Spark's listener bus feeds it on py4j's callback thread while the driver reads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._progress: dict[str, Mapping[str, Any]] = {}
        self._ended: set[str] = set()
        self._idle: set[str] = set()
        self._gone: OrderedDict[str, None] = OrderedDict()

    def on_progress(self, text: str) -> None:
        """A ``QueryProgressEvent``'s JSON: ``{"progress": {...}}`` (the same object as a
        ``StreamingQuery.lastProgress``)."""
        progress = json.loads(text).get("progress")
        if isinstance(progress, Mapping) and progress.get("runId"):
            self.keep_progress(str(progress["runId"]), progress)

    def on_idle(self, text: str) -> None:
        """A ``QueryIdleEvent``'s JSON: ``{"id", "runId", "timestamp"}``. Spark posts it instead of
        a progress event for a trigger without new records (the first, then every 10 s), but still
        updates the query's ``lastProgress``: a query resumed from its checkpoint with nothing new
        to read has finished a trigger, and only its handle has the progress (`idled`)."""
        self._mark(self._idle, text)

    def idled(self, run_id: str) -> bool:
        """Whether the run went idle since this was last asked (then its handle's progress is
        newer than its last progress event: `keep_progress` it)."""
        with self._lock:
            if run_id in self._idle:
                self._idle.discard(run_id)
                return True
            return False

    def keep_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        """Keep a progress asked of the run's handle (after `idled`)."""
        with self._lock:
            if run_id not in self._gone:
                self._progress[run_id] = progress

    def on_terminated(self, text: str) -> None:
        """A ``QueryTerminatedEvent``'s JSON: ``{"id", "runId", "exception", ...}`` (why it failed
        is asked of the query's handle, as before: `driver._reason` reads pyspark's exception)."""
        self._mark(self._ended, text)

    def _mark(self, runs: set[str], text: str) -> None:
        """Adds the run an event's JSON names (its ``runId``) to ``runs``, unless it was let go."""
        event = json.loads(text)
        if isinstance(event, Mapping) and event.get("runId"):
            run_id = str(event["runId"])
            with self._lock:
                if run_id not in self._gone:
                    runs.add(run_id)

    def progress(self, run_id: str) -> Mapping[str, Any] | None:
        """The run's latest progress (None: Spark has not finished a trigger of it yet)."""
        with self._lock:
            return self._progress.get(run_id)

    def ended(self, run_id: str) -> bool:
        """Whether the run has ended (stopped, or failed: its handle's ``exception()`` says)."""
        with self._lock:
            return run_id in self._ended

    def forget(self, run_id: str) -> None:
        """Drop what is kept of a run the driver no longer follows, and its later events."""
        with self._lock:
            self._progress.pop(run_id, None)
            self._ended.discard(run_id)
            self._idle.discard(run_id)
            self._gone[run_id] = None
            while len(self._gone) > _GONE_KEPT:
                self._gone.popitem(last=False)

    def runs(self) -> int:
        """How many runs are kept (each is forgotten when its query stops)."""
        with self._lock:
            return len(self._progress.keys() | self._ended | self._idle)


class _Listener:
    """The py4j proxy of Spark's ``PythonStreamingQueryListener``: hands each event's JSON on.

    It must never raise into Spark's listener bus: a bad event is logged and dropped."""

    def __init__(self, events: QueryEvents) -> None:
        self._events = events

    def onQueryStarted(self, jevent: Any) -> None:  # Spark's interface's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        try:
            self._events.on_progress(jevent.json())
        except Exception:  # never into Spark's listener bus
            log.warning("a query progress event could not be read", exc_info=True)

    def onQueryIdle(self, jevent: Any) -> None:
        try:
            self._events.on_idle(jevent.json())
        except Exception:
            log.warning("a query idle event could not be read", exc_info=True)

    def onQueryTerminated(self, jevent: Any) -> None:
        try:
            self._events.on_terminated(jevent.json())
        except Exception:
            log.warning("a query terminated event could not be read", exc_info=True)

    class Java:
        implements: ClassVar[list[str]] = [_JAVA_LISTENER]


def listen(spark: Any, events: QueryEvents) -> None:
    """Registers a listener with ``spark``'s streaming query manager that feeds ``events``
    (py4j's callback server is started if it is not yet: the ``foreachBatch`` sinks use it too)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = SparkContext._gateway
    if gateway is None:
        raise RuntimeError("no py4j gateway: the Spark session is not running")
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    jvm = spark.sparkContext._jvm
    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
        _Listener(events)
    )
    spark.streams._jsqm.addListener(wrapper)
