"""What the Spark driver reports of a query while Spark starts it and once it runs (no Spark: a
fake query handle stands for pyspark's StreamingQuery)."""

from __future__ import annotations

from typing import Any, ClassVar

from headwater.engine.spark.driver import QueryDriver, processed_offsets
from headwater.engine.spark.settings import EngineSettings
from headwater.kafka.clients import KafkaSettings


class _Handle:
    """A started StreamingQuery: no progress until Spark has finished a trigger."""

    isActive = True
    status: ClassVar[dict[str, str]] = {"message": "Initializing sources"}

    def __init__(self) -> None:
        self.lastProgress: Any = None


class _Driver(QueryDriver):
    def __init__(self) -> None:
        super().__init__(
            EngineSettings(memory_reserve_mb=0, query_memory_mb=0), KafkaSettings("127.0.0.1:1")
        )
        self.handles: dict[str, _Handle] = {}

    def _start(self, query_id: str) -> None:  # what `_start` does once `writer.start()` returned
        running = self._queries[query_id]
        running.progressed, running.processed = False, {}
        running.handle = self.handles[query_id] = _Handle()
        running.state, running.message = "RUNNING", ""

    def _stop(self, query_id: str) -> None:
        self._queries[query_id].handle = None


PAYLOAD = {"source": {"topic": "orders", "partitions": 2}, "join": False}


def test_a_started_query_is_pending_until_spark_finished_its_first_micro_batch() -> None:
    driver = _Driver()
    driver.sync({"CTAS_T_1": PAYLOAD})
    status = driver.statuses()["CTAS_T_1"]
    assert status["state"] == "PENDING"  # not "RUNNING with 0 records"
    assert "first micro-batch" in status["message"]
    assert "processed" not in status
    driver.handles["CTAS_T_1"].lastProgress = {"sources": [{"endOffset": '{"0": 5, "1": 7}'}]}
    status = driver.statuses()["CTAS_T_1"]
    assert status["state"] == "RUNNING" and status["message"] == ""
    assert status["processed"] == {"orders": {"0": 5, "1": 7}}


def test_the_offsets_a_query_processed_come_from_its_sources_end_offsets() -> None:
    join = {
        "join": True,
        "source": {"topic": "a"},
        "leaves": [{"topic": "a", "partitions": 1}, {"topic": "b", "partitions": 1}],
    }
    progress = {"sources": [{"endOffset": '{"0": 3}'}, {"endOffset": {"0": 9}}]}
    assert processed_offsets(join, progress) == {"a": {"0": 3}, "b": {"0": 9}}
    self_join = {**join, "leaves": [{"topic": "a"}, {"topic": "a"}]}
    assert processed_offsets(self_join, progress) == {"a": {"0": 3}}
    assert processed_offsets(PAYLOAD, {"sources": []}) == {}
