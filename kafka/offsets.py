"""End offsets and lag, learned from fetch responses, never from ListOffsets. Does I/O (Kafka).

Workaround "ListOffsets latest is wrong" (Tansu 0.6.0, docs/embedded-broker.md): in memory it
answers the base offset of the last batch + 1 (so 1 after one 100-record batch), on S3 it is wrong
even for one-record batches, and under read_committed it answers 0 while any transaction is open. So
every end offset here comes from Fetch, which Tansu answers correctly (high watermark and last stable
offset, measured with librdkafka's debug log), and producers may batch normally.

What "end" means (the same on Tansu and on Apache Kafka): the position a consumer of the given
isolation level reaches once it has read everything currently readable.
- read_uncommitted: the high watermark (offset of the last record + 1).
- read_committed: the last stable offset: the first offset of the oldest open transaction, or the high
  watermark when none is open. A reader cannot pass an open transaction, so lag counts only what it
  could read now. (On Tansu aborted records are delivered to read_committed readers and counted.)
librdkafka caches only the high watermark (``get_watermark_offsets(cached=True)``, also under
read_committed: measured), so the read_committed end is found by reading to the end of the partition
(``enable.partition.eof``) and taking ``position()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from headwater.kafka.clients import KafkaSettings
from headwater.kafka.clients import consumer as make_consumer
from headwater.kafka.errors import EndOffsetsUnavailable, TopicError

log = logging.getLogger(__name__)

_POLL_S = 0.1
# Empty fetches come back after this long, so reaching end of partition takes about this long.
_PROBE_FETCH_WAIT_MS = 20


@dataclass(frozen=True, slots=True)
class LagInfo:
    """How far a reader is behind on one partition (KIP-535's LagInfo)."""

    current: int
    end: int
    lag: int

    @classmethod
    def of(cls, current: int, end: int) -> LagInfo:
        """Lag of a reader at `current` (next offset it will read) against `end`; never negative."""
        return cls(current=current, end=end, lag=max(0, end - current))


def cached_end_offsets(consumer: Consumer, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """High watermarks that `consumer` saw in its latest fetch responses (no network I/O).

    Only partitions the consumer has fetched from are in the result. This is the read_uncommitted end
    even for a read_committed consumer (librdkafka caches the high watermark only); a read_committed
    reader knows its end when it reaches end of partition: its ``position()`` then.

    Args:
        consumer: a consumer that has polled the partitions.
        topic: topic name.
        partitions: partition numbers.

    Returns:
        {partition: high watermark} for the partitions with a cached value.
    """
    found: dict[int, int] = {}
    for partition in partitions:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if high is not None and high >= 0:
            found[partition] = int(high)
    return found


def end_offsets(
    settings: KafkaSettings,
    topic: str,
    partitions: Iterable[int],
    *,
    read_committed: bool = False,
    start_offsets: Mapping[int, int] | None = None,
    timeout_ms: int = 10000,
) -> dict[int, int]:
    """End offsets (see the module docstring) read through a short-lived probe consumer.

    read_uncommitted needs one fetch response per partition. read_committed reads each partition from
    `start_offsets` (default: its beginning) to its end and discards the records, so pass the
    reader's own position when it is known; it must not lie beyond the end.

    Args:
        settings: connection settings.
        topic: topic name.
        partitions: partition numbers.
        read_committed: the isolation level whose end is wanted.
        start_offsets: {partition: offset} to start reading at.
        timeout_ms: overall time limit.

    Returns:
        {partition: end offset} for every requested partition.

    Raises:
        EndOffsetsUnavailable: some partitions gave no answer in time.
        TopicError: the topic or a partition does not exist.
    """
    wanted = sorted(set(partitions))
    starts = dict(start_offsets or {})
    probe = make_consumer(
        settings,
        "end-offsets-probe",
        read_committed=read_committed,
        partition_eof=True,
        fetch_wait_max_ms=_PROBE_FETCH_WAIT_MS,
    )
    try:
        # Offset 0, not OFFSET_BEGINNING: a logical offset costs a ListOffsets round first (~0.5 s
        # measured on Tansu); below the log start, auto.offset.reset=earliest moves the probe up.
        probe.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in wanted])
        return _probe_until_known(probe, topic, wanted, read_committed, timeout_ms)
    finally:
        probe.close()


def start_positions(
    settings: KafkaSettings,
    topic: str,
    partitions: Iterable[int],
    *,
    from_beginning: bool,
    timeout_ms: int = 10000,
) -> list[TopicPartition]:
    """Where a reader that starts now begins each partition (``auto.offset.reset``): its beginning,
    or its end as of this call, read from fetches (never ``OFFSET_END``, which librdkafka resolves
    with ListOffsets: on Tansu that answers an offset inside the last batch, so the reader replays
    old records, and it is resolved after ``assign`` returns, so a record written meanwhile is
    missed). Assigned at these positions, a reader gets every record written after this call.

    Args:
        settings: connection settings.
        topic: topic name.
        partitions: partition numbers.
        from_beginning: ``earliest`` (else ``latest``).
        timeout_ms: overall time limit for the ends.

    Returns:
        One ``TopicPartition`` per partition, with its start offset.

    Raises:
        EndOffsetsUnavailable: some partitions gave no answer in time.
        TopicError: the topic or a partition does not exist.
    """
    wanted = sorted(set(partitions))
    if from_beginning:  # ListOffsets "earliest" is right on Tansu
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted]
    ends = end_offsets(settings, topic, wanted, timeout_ms=timeout_ms)
    return [TopicPartition(topic, p, ends[p]) for p in wanted]


def _probe_until_known(
    probe: Consumer, topic: str, wanted: list[int], read_committed: bool, timeout_ms: int
) -> dict[int, int]:
    ends: dict[int, int] = {}
    deadline = time.monotonic() + timeout_ms / 1000
    while len(ends) < len(wanted):
        if time.monotonic() > deadline:
            missing = tuple(p for p in wanted if p not in ends)
            raise EndOffsetsUnavailable(topic, missing, timeout_ms)
        message = probe.poll(_POLL_S)
        if message is None:
            continue
        partition = message.partition()
        if partition is None or partition in ends:
            continue
        error = message.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            # At end of partition the position is the end for this isolation level (the EOF event
            # carries the same offset; it also covers a partition we read nothing from).
            (position,) = probe.position([TopicPartition(topic, partition)])
            ends[partition] = max(int(position.offset), int(message.offset() or 0))
        elif error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise TopicError(topic, f"cannot read partition {partition}: {error.str()}")
        elif error is not None:
            log.debug("end-offset probe of %s[%d]: %s", topic, partition, error.str())
        elif not read_committed:
            # The fetch response that carried this record also carried the high watermark.
            cached = cached_end_offsets(probe, topic, [partition])
            if partition in cached:
                ends[partition] = cached[partition]
    return ends
