"""Pull queries on streams: read the stream's topic from the beginning to its end. Does I/O (Kafka).

ksqlDB answers a pull query on a stream by scanning its topic up to the end offsets taken when the
query starts; so does this, with a short-lived consumer assigned to every partition (no group, no
commits). Records that do not decode are skipped (counted in the log), as ksqlDB's processing log
would record them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

from confluent_kafka import KafkaError, TopicPartition

from headwater.engine.errors import EngineError
from headwater.engine.formats.serde import RowSerde
from headwater.engine.pull.query import Row
from headwater.engine.record_headers import header_columns, with_headers
from headwater.kafka.clients import KafkaSettings, consumer, poll_batch
from headwater.kafka.offsets import end_offsets
from headwater.metastore.catalog import Source

log = logging.getLogger(__name__)


class StreamScanTimeout(EngineError):
    """The topic could not be read to its end in time."""

    error_code = 50302
    retriable = True


def scan_stream(
    settings: KafkaSettings,
    source: Source,
    custom_types: Mapping[str, object] | None = None,
    *,
    timeout_s: float = 30.0,
) -> tuple[Iterator[Row], dict[int, int]]:
    """The stream's records up to the end offsets seen now, and those end offsets.

    Returns:
        (rows in partition order then offset order, {partition: end offset}). The rows are read
        lazily; a caller that stops early (LIMIT) stops reading.

    Raises:
        StreamScanTimeout: the end could not be reached within ``timeout_s``.
    """
    partitions = list(range(source.partitions))
    ends = end_offsets(settings, source.topic, partitions, timeout_ms=int(timeout_s * 1000))
    serde = RowSerde.for_source(source, custom_types or {})
    return _records(settings, source, serde, ends, timeout_s), ends


def _records(
    settings: KafkaSettings,
    source: Source,
    serde: RowSerde,
    ends: Mapping[int, int],
    timeout_s: float,
) -> Iterator[Row]:
    wanted = {p: end for p, end in ends.items() if end > 0}
    if not wanted:
        return
    # End of partition also ends a partition's scan: transaction markers occupy offsets, so the
    # last record's offset + 1 may be below the end offset.
    reader = consumer(settings, "stream-pull", partition_eof=True)
    headers = header_columns(source)
    skipped = 0
    try:
        for partition in sorted(wanted):
            reader.assign([TopicPartition(source.topic, partition, 0)])
            deadline = time.monotonic() + timeout_s
            end = wanted[partition]
            position = 0
            while position < end:
                if time.monotonic() > deadline:
                    raise StreamScanTimeout(
                        f"could not read {source.topic} partition {partition} to offset {end} "
                        f"within {timeout_s:g} s (at {position})"
                    )
                for message in poll_batch(reader, 1000, 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            position = end
                            break
                        log.warning("stream scan of %s: %s", source.topic, error)
                        continue
                    offset = int(message.offset() or 0)
                    if offset >= end:
                        position = end
                        break
                    position = offset + 1
                    try:
                        key = serde.deserialize_key(message.key())
                        value = serde.deserialize_value(message.value())
                    except EngineError as exc:
                        skipped += 1
                        log.debug(
                            "stream scan of %s skips offset %d: %s",
                            source.topic,
                            offset,
                            exc.message,
                        )
                        continue
                    if value is None:
                        continue
                    if headers:
                        value = with_headers(value, headers, message.headers())
                    _kind, timestamp = message.timestamp()
                    yield Row(key, value, int(timestamp), partition, offset)
    finally:
        reader.close()
        if skipped:
            log.warning("stream scan of %s skipped %d undecodable records", source.topic, skipped)
