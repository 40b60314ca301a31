"""What Spark's listener events tell the driver of its queries (`engine/spark/query_events.py`): no
Spark here; the events are the JSON Spark's ``QueryProgressEvent.json()`` and
``QueryTerminatedEvent.json()`` write, and the handles are fakes that fail when asked what the
events already said (the live CSAS lifecycle test runs the listener on Spark)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from headwater.engine.spark.driver import QueryDriver
from headwater.engine.spark.query_events import _GONE_KEPT, QueryEvents, _Listener
from headwater.engine.spark.settings import EngineSettings
from headwater.kafka.clients import KafkaSettings


def _progress(run_id: str, ends: dict[str, int], batch: int = 0) -> str:
    return json.dumps(
        {
            "progress": {
                "id": "q-1",
                "runId": run_id,
                "batchId": batch,
                "durationMs": {"triggerExecution": 40 + batch},
                "sources": [{"endOffset": json.dumps(ends)}],
            }
        }
    )


def _terminated(run_id: str, exception: str | None = None) -> str:
    return json.dumps(
        {"id": "q-1", "runId": run_id, "exception": exception, "errorClassOnException": None}
    )


def test_each_run_keeps_its_latest_progress_and_its_end() -> None:
    events = QueryEvents()
    assert events.progress("r1") is None and not events.ended("r1")
    events.on_progress(_progress("r1", {"0": 5}, batch=0))
    events.on_progress(_progress("r1", {"0": 9}, batch=1))
    events.on_progress(_progress("r2", {"0": 1}))
    progress = events.progress("r1")
    assert progress is not None and progress["batchId"] == 1
    assert not events.ended("r1")
    events.on_terminated(_terminated("r1", "java.lang.RuntimeException: boom"))
    assert events.ended("r1") and not events.ended("r2")


def test_a_forgotten_run_keeps_nothing_and_its_late_events_are_dropped() -> None:
    events = QueryEvents()
    events.on_progress(_progress("r1", {"0": 5}))
    events.forget("r1")
    assert events.runs() == 0
    # Spark's bus is asynchronous: the stopped run's last progress and its end come afterwards
    events.on_progress(_progress("r1", {"0": 6}))
    events.on_terminated(_terminated("r1"))
    assert events.runs() == 0 and events.progress("r1") is None
    for i in range(_GONE_KEPT + 10):  # what it remembers of forgotten runs is bounded
        events.forget(f"x{i}")
    assert len(events._gone) == _GONE_KEPT


def test_events_without_a_run_are_ignored() -> None:
    events = QueryEvents()
    events.on_progress(json.dumps({"progress": {"id": "q"}}))
    events.on_progress(json.dumps({"other": 1}))
    events.on_terminated(json.dumps({"id": "q"}))
    assert events.runs() == 0


class _JavaEvent:
    def __init__(self, text: str | Exception) -> None:
        self._text = text

    def json(self) -> str:
        if isinstance(self._text, Exception):
            raise self._text
        return self._text


def test_the_listener_never_raises_into_sparks_bus(caplog: pytest.LogCaptureFixture) -> None:
    events = QueryEvents()
    listener = _Listener(events)
    listener.onQueryProgress(_JavaEvent("not json"))
    listener.onQueryTerminated(_JavaEvent(RuntimeError("py4j: the JVM is gone")))
    listener.onQueryStarted(object())
    listener.onQueryIdle(_JavaEvent(RuntimeError("py4j: the JVM is gone")))
    assert "could not be read" in caplog.text
    listener.onQueryIdle(_JavaEvent(json.dumps({"id": "q", "runId": "r1", "timestamp": "t"})))
    assert events.idled("r1") and not events.idled("r1")  # told once
    listener.onQueryProgress(_JavaEvent(_progress("r1", {"0": 3})))
    listener.onQueryTerminated(_JavaEvent(_terminated("r1")))
    assert events.progress("r1") is not None and events.ended("r1")


class _Handle:
    """A started query whose state only the events tell: asking it fails the test."""

    runId = "run-1"
    status: dict[str, str] = {"message": "Waiting for data"}  # noqa: RUF012 - a fake's value

    def __init__(self) -> None:
        self.failure: Any = None
        self.progress: Any = None  # what Spark's handle would answer
        self.asked = 0

    @property
    def isActive(self) -> bool:
        raise AssertionError("asked the JVM whether the query is active")

    @property
    def lastProgress(self) -> Any:
        self.asked += 1
        if self.progress is None:
            raise AssertionError("asked the JVM for the query's progress without an idle event")
        return self.progress

    def exception(self) -> Any:
        return self.failure


class _Failure:
    desc = "Topic gone\nat somewhere"


class _Driver(QueryDriver):
    def __init__(self) -> None:
        super().__init__(
            EngineSettings(memory_reserve_mb=0, query_memory_mb=0), KafkaSettings("127.0.0.1:1")
        )
        self._events = QueryEvents()
        self.handles: dict[str, _Handle] = {}

    def _start(self, query_id: str) -> None:  # what `_start` does once `writer.start()` returned
        running = self._queries[query_id]
        running.progressed, running.processed = False, {}
        running.handle = self.handles[query_id] = _Handle()
        running.run_id = running.handle.runId
        running.state, running.message = "RUNNING", ""

    def _stop(self, query_id: str) -> None:
        running = self._queries[query_id]
        running.handle = None
        if running.run_id and self._events is not None:
            self._events.forget(running.run_id)


PAYLOAD = {"source": {"topic": "orders", "partitions": 2}, "join": False}


def test_the_driver_takes_progress_and_failures_from_the_events_not_the_handles() -> None:
    driver = _Driver()
    driver.sync({"CSAS_S_1": PAYLOAD})
    events = driver._events
    assert events is not None
    assert driver.statuses()["CSAS_S_1"]["state"] == "PENDING"
    events.on_progress(_progress("run-1", {"0": 5, "1": 7}))
    status = driver.statuses()["CSAS_S_1"]
    assert status["state"] == "RUNNING"
    assert status["processed"] == {"orders": {"0": 5, "1": 7}}
    assert status["lastBatchMs"] == 40
    driver.check()  # the run has not ended: nothing asked, still running
    assert driver.statuses()["CSAS_S_1"]["state"] == "RUNNING"

    driver.handles["CSAS_S_1"].failure = _Failure()
    events.on_terminated(_terminated("run-1", "Topic gone"))
    driver.check()
    status = driver.statuses()["CSAS_S_1"]
    assert status["state"] == "ERROR" and status["message"] == "Topic gone"
    assert events.runs() == 0  # the ended run is let go


def test_an_idle_run_has_its_progress_asked_once_per_idle_event() -> None:
    """A query resumed from its checkpoint with nothing new to read: Spark posts an idle event, not
    a progress event, but updates the handle's progress (seen on Spark 4.3: found when a CTAS moved
    to another server after its records had all been counted stayed PENDING)."""
    driver = _Driver()
    driver.sync({"CSAS_S_1": PAYLOAD})
    events = driver._events
    assert events is not None
    handle = driver.handles["CSAS_S_1"]
    assert driver.statuses()["CSAS_S_1"]["state"] == "PENDING"
    handle.progress = json.loads(_progress("run-1", {"0": 4, "1": 2}))["progress"]
    assert driver.statuses()["CSAS_S_1"]["state"] == "PENDING"  # no event: not asked
    assert handle.asked == 0
    events.on_idle(json.dumps({"id": "q-1", "runId": "run-1", "timestamp": "t"}))
    status = driver.statuses()["CSAS_S_1"]
    assert status["state"] == "RUNNING"
    assert status["processed"] == {"orders": {"0": 4, "1": 2}}
    driver.statuses()
    assert handle.asked == 1  # once per idle event, not at every look
    events.on_idle(json.dumps({"id": "q-1", "runId": "other", "timestamp": "t"}))
    driver.statuses()
    assert handle.asked == 1  # another run's idleness is not this one's
