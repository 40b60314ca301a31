"""What a stopped query gives back in the processes that ran it: the sink's producer, and the source
consumers Spark's Python workers kept (no Spark session, no broker)."""

from __future__ import annotations

import json
import time

import pytest

from headwater.engine.spark import kafka_source
from headwater.engine.spark.sink import ExactlyOnceSink
from headwater.kafka.clients import KafkaSettings


class _Consumer:
    """Stands in for a cached confluent-kafka consumer: only whether it was closed matters."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_cached_consumers_left_idle_are_closed_when_the_worker_reads_again() -> None:
    options = {"bootstrap.servers": "127.0.0.1:1"}
    used = json.dumps(["127.0.0.1:1", "live", 0])
    gone = json.dumps(["127.0.0.1:1", "terminated", 1])
    live, stale = _Consumer(), _Consumer()
    saved = dict(kafka_source._readers)
    kafka_source._readers.clear()
    try:
        kafka_source._readers[used] = (live, time.monotonic() - 1)  # type: ignore[assignment]
        kafka_source._readers[gone] = (stale, time.monotonic() - 10 * 60)  # type: ignore[assignment]
        assert kafka_source._reader(options, "live", 0) is live
        assert stale.closed and not live.closed
        assert kafka_source._readers == {}
    finally:
        kafka_source._readers.clear()
        kafka_source._readers.update(saved)


def test_a_closed_sink_releases_its_producer_without_waiting_for_the_broker() -> None:
    sink = ExactlyOnceSink(
        KafkaSettings("127.0.0.1:1", client_config={"log_level": 0}), "Q_1", "out", 1
    )
    sink._producer.produce("out", b"queued, never delivered")
    started = time.monotonic()
    sink.close(timeout_s=0.5)
    assert time.monotonic() - started < 5
    with pytest.raises(RuntimeError, match="closed"):
        sink._producer.produce("out", b"after close")
    sink.close(timeout_s=0.5)  # twice: no error
