"""Writes INSERT VALUES rows to their topics and waits for the broker's acknowledgement. Does I/O.

One idempotent producer per server ("inserts"), shared by every request thread (confluent-kafka's
Producer is thread-safe). A request returns only once its record is acknowledged, with the partition
and offset it was written at: the offsets are what a later read-your-writes token carries.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message

from headwater.kafka.clients import KafkaSettings, producer
from headwater.kafka.errors import ProduceFailed


@dataclass(frozen=True, slots=True)
class Written:
    """Where a record landed."""

    topic: str
    partition: int
    offset: int


class RowWriter:
    """Produces one record at a time and waits for its acknowledgement.

    Args:
        settings: how to reach Kafka.
        timeout_s: how long to wait for an acknowledgement.
    """

    def __init__(self, settings: KafkaSettings, timeout_s: float = 10.0) -> None:
        self._producer = producer(settings, "inserts")
        self._timeout_s = timeout_s

    def write(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Written:
        """Write one record and wait until the broker has it.

        Args:
            topic: the topic.
            key, value: the serialized key and value (None: no key / a tombstone).
            partition: the partition (None: the producer's murmur2 partitioner decides).
            timestamp_ms: the record's timestamp (None: now).
            headers: record headers.

        Raises:
            ProduceFailed: the broker refused the record, or did not acknowledge it in time.
        """
        done = threading.Event()
        outcome: list[tuple[KafkaError | None, Message | None]] = []

        def delivered(error: KafkaError | None, message: Message | None) -> None:
            outcome.append((error, message))
            done.set()

        extra: dict[str, object] = {}
        if partition is not None:
            extra["partition"] = partition
        if timestamp_ms is not None:
            extra["timestamp"] = timestamp_ms
        if headers:
            extra["headers"] = headers
        try:
            self._producer.produce(topic, value=value, key=key, on_delivery=delivered, **extra)
        except BufferError as exc:
            raise ProduceFailed(topic, f"the producer's queue is full ({exc})") from exc
        except Exception as exc:  # KafkaException from librdkafka: bad topic, too large, ...
            raise ProduceFailed(topic, str(exc), retriable=False) from exc
        self._producer.poll(0)
        self._producer.flush(self._timeout_s)
        if not done.wait(0):
            raise ProduceFailed(topic, f"no acknowledgement within {self._timeout_s:g} s "
                                       "(the record may still have been written)")
        error, message = outcome[0]
        if error is not None or message is None:
            retriable = bool(error.retriable()) if error is not None else True
            raise ProduceFailed(topic, error.str() if error else "no message", retriable=retriable)
        return Written(topic, int(message.partition() or 0), int(message.offset() or 0))

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (up to ``timeout_s``)."""
        self._producer.flush(timeout_s)
