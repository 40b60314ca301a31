"""Writes INSERT VALUES rows to their topics and waits for the broker's acknowledgement. Does I/O.

One idempotent producer per server ("inserts"), shared by every request thread (confluent-kafka's
Producer is thread-safe). A request returns only once its record is acknowledged, with the partition
and offset it was written at: the offsets are what a later read-your-writes token carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from headwater.kafka.clients import KafkaSettings, producer_config
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
        timeout_s: how long a record may wait for its acknowledgement: librdkafka's own delivery
            timeout (``message.timeout.ms``), so that a record not acknowledged by then has failed
            for good (never written later behind the client's back), and the request answers a
            retriable error within about that time while Kafka is unreachable.
    """

    def __init__(self, settings: KafkaSettings, timeout_s: float = 5.0) -> None:
        config = producer_config(settings, "inserts")
        config["message.timeout.ms"] = int(timeout_s * 1000)
        self._producer = Producer(config)
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
        (found,) = self.write_many([(topic, key, value, partition, timestamp_ms, headers)])
        if isinstance(found, ProduceFailed):
            raise found
        return found

    def write_many(
        self,
        records: list[
            tuple[
                str,
                bytes | None,
                bytes | None,
                int | None,
                int | None,
                list[tuple[str, bytes | None]] | None,
            ]
        ],
    ) -> list[Written | ProduceFailed]:
        """Write records (topic, key, value, partition, timestamp, headers) in order and wait
        once for all their acknowledgements: where each landed, or why it did not."""
        outcomes: list[tuple[KafkaError | None, Message | None] | ProduceFailed | None] = []
        for topic, key, value, partition, timestamp_ms, headers in records:
            index = len(outcomes)
            outcomes.append(None)

            def delivered(
                error: KafkaError | None, message: Message | None, index: int = index
            ) -> None:
                outcomes[index] = (error, message)

            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if timestamp_ms is not None:
                extra["timestamp"] = timestamp_ms
            if headers:
                extra["headers"] = headers
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=delivered, **extra)
            except BufferError as exc:
                outcomes[index] = ProduceFailed(topic, f"the producer's queue is full ({exc})")
            except (KafkaException, TypeError, ValueError) as exc:  # bad topic, too large, ...
                outcomes[index] = ProduceFailed(topic, str(exc), retriable=False)
            self._producer.poll(0)
        self._producer.flush(self._timeout_s + 1.0)  # the delivery reports come by then
        found: list[Written | ProduceFailed] = []
        for (topic, *_rest), outcome in zip(records, outcomes, strict=True):
            if isinstance(outcome, ProduceFailed):
                found.append(outcome)
            elif outcome is None:
                found.append(
                    ProduceFailed(
                        topic,
                        f"no acknowledgement within {self._timeout_s:g} "
                        "s (the record may still have been written)",
                    )
                )
            else:
                error, message = outcome
                if error is not None or message is None:
                    retriable = bool(error.retriable()) if error is not None else True
                    found.append(
                        ProduceFailed(
                            topic, error.str() if error else "no message", retriable=retriable
                        )
                    )
                else:
                    found.append(
                        Written(topic, int(message.partition() or 0), int(message.offset() or 0))
                    )
        return found

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (up to ``timeout_s``)."""
        self._producer.flush(timeout_s)
