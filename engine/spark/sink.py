"""The sink of a persistent query: writes each micro-batch's records to Kafka exactly once. Does I/O.

Broker transactions are not trusted (the embedded broker shows aborted records), so exactly-once
rests on the batch itself: Spark replays the one micro-batch whose commit it did not record, with
the same batch id and the same records (the operators are deterministic), and every record this
sink writes carries headers ``hw.query`` (query id), ``hw.batch`` (batch id) and ``hw.seq`` (its index
in the batch's output, in the order the records were computed: see `OutputRecord.order`). An idempotent producer keeps each
partition in ``seq`` order, so on a sink partition everything up to the last record found there was
written. When a sink starts (a new process, a new owner) it reads the tail of every sink partition
for this query's last record; a replayed batch then skips, per partition, what is already there.
This holds on Apache Kafka as on the embedded broker; other writers on the same topic (INSERT INTO)
are passed over while reading the tail.

A partition's offsets only grow, so a record the broker confirms at an offset not past every offset
it confirmed before on that partition was not kept where it says (`Confirmations`): the embedded
broker, restarted after a kill -9, confirmed records at offsets 0-3 of a partition that held
thousands and kept none of them. Such records are written again before the batch counts as
written; when they cannot be, the batch fails.

Records the operators skipped arrive as rows with ``error`` set: they are counted, remembered as the
query's last error, and written to the processing-log topic (never to the sink).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, Producer, TopicPartition

from headwater.engine.spark.packed import PACKED_ARROW, unpack
from headwater.kafka.clients import (
    KafkaSettings,
    close_producer,
    consumer,
    poll_batch,
    producer_config,
)

log = logging.getLogger(__name__)

QUERY_HEADER = "hw.query"
BATCH_HEADER = "hw.batch"
SEQ_HEADER = "hw.seq"
_TAIL_WINDOW = 1000
_TAIL_MAX = 10_000_000
#: Times a batch's records the broker confirmed at offsets gone back are written again, the n-th
#: after a pause of n times this (the embedded broker, restarted after a kill -9, confirmed up to
#: 24 records at offsets from 0 before its log was right again: a fraction of a second)
_REWRITES = 5
_REWRITE_PAUSE_S = 0.5


class CheckpointBehind(RuntimeError):
    """The sink topic holds batches this query's checkpoint has not reached: see
    `ExactlyOnceSink._check_resumable`."""


@dataclass(frozen=True, slots=True)
class Written:
    """The last record of a query found on one sink partition."""

    batch: int
    seq: int


@dataclass
class SinkStats:
    """What a query's sink has done since it started (read by the status reports)."""

    records: int = 0
    batches: int = 0
    last_batch: int = -1
    errors: int = 0
    last_error: str = ""
    last_error_time_ms: int = 0
    skipped_replayed: int = 0
    rewritten: int = 0  # confirmed at an offset the partition had passed, so written again
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class ExactlyOnceSink:
    """``foreachBatch`` target of one query."""

    def __init__(
        self,
        settings: KafkaSettings,
        query_id: str,
        topic: str,
        partitions: int,
        processing_log_topic: str | None = None,
        on_error: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._settings = settings
        self.query_id = query_id
        self.topic = topic
        self.partitions = partitions
        self._log_topic = processing_log_topic
        self._on_error = on_error
        self._written: dict[int, Written] | None = None
        self._confirmed = Confirmations()
        config = producer_config(settings, f"query-sink-{query_id}")
        config.update(
            {
                "enable.idempotence": True,
                "linger.ms": 5,
                "acks": "all",
                "compression.type": "none",
                # every record's report: its offset is checked (a Python call per record, ~0.3 us
                # on the batch's serial path, the price of not trusting a broker's confirmation)
                "on_delivery": self._confirmed,
            }
        )
        self._producer = Producer(config)
        self.stats = SinkStats()

    def __call__(self, batch: Any, batch_id: int) -> None:
        """Spark's foreachBatch callback: ``batch`` is the micro-batch's DataFrame."""
        table = batch.toArrow()
        if table.schema.names == PACKED_ARROW.names:  # a stateless query's or an aggregation's
            parts = unpack(table)
            table = pa.concat_tables(parts) if parts else None
        self._write(_Columns.of_table(table), batch_id)

    def write(self, rows: Sequence[Mapping[str, Any]], batch_id: int) -> None:
        """Writes one batch (rows of `kafka_source.OUTPUT_SCHEMA`), skipping what a replay already
        wrote. Raises when the broker does not confirm every record (the batch then fails)."""
        self._write(_Columns.of_rows(rows), batch_id)

    def _write(self, batch: _Columns, batch_id: int) -> None:
        if self._written is None:
            self._written = self._read_tails()
            self._check_resumable(batch_id)
        confirmed = self._confirmed
        confirmed.failures.clear()
        confirmed.suspect.clear()
        # partitions where this batch may have been written in part (a replay): checked per record
        resuming = {
            p: w.seq if w.batch == batch_id else None
            for p, w in self._written.items()
            if w.batch >= batch_id
        }
        query, batch_text = self.query_id.encode(), str(batch_id).encode()
        produce, topic = self._produce, self.topic
        seq = 0
        written = 0
        skipped = 0
        now_ms = int(time.time() * 1000)
        for i, (key, value, partition, timestamp, error) in enumerate(
            zip(batch.key, batch.value, batch.partition, batch.timestamp, batch.error, strict=True)
        ):
            if error is not None:
                self._processing_error(batch.error_row(i), now_ms)
                continue
            if resuming and partition in resuming:
                done = resuming[partition]
                if done is None or seq <= done:  # a later batch there, or this one's up to seq
                    skipped += 1
                    seq += 1
                    continue
            headers: list[tuple[str, str | bytes | None]] = [
                (QUERY_HEADER, query),
                (BATCH_HEADER, batch_text),
                (SEQ_HEADER, b"%d" % seq),
            ]
            produce(topic, key, value, partition, timestamp, headers)
            written += 1
            seq += 1
        remaining = self._producer.flush(30)
        rewritten = rounds = 0
        while confirmed.suspect and not (remaining or confirmed.failures):
            if rounds == _REWRITES:
                self._written = None  # the next attempt reads the tails again
                raise RuntimeError(
                    f"query {self.query_id}: the broker confirmed {len(confirmed.suspect)} "
                    f"record(s) of batch {batch_id} at offsets its partitions had passed "
                    f"({confirmed.describe()}), {_REWRITES} times: its log went back; the batch "
                    "fails and is run again"
                )
            rounds += 1
            rewritten += self._rewrite(batch_id, _REWRITE_PAUSE_S * rounds)
            remaining = self._producer.flush(30)
        if confirmed.failures or remaining:
            self._written = None  # what was written in part is found in the tails next time
            raise RuntimeError(
                f"query {self.query_id}: the broker did not confirm "
                f"{len(confirmed.failures) + remaining} record(s) of batch {batch_id}: "
                f"{confirmed.failures[:3]}"
            )
        for partition in range(self.partitions):
            self._written[partition] = Written(batch_id, seq - 1)
        with self.stats.lock:
            self.stats.records += written
            self.stats.batches += 1
            self.stats.last_batch = batch_id
            self.stats.skipped_replayed += skipped
            self.stats.rewritten += rewritten
        if skipped:
            log.info(
                "query %s: batch %d replayed after a restart; %d record(s) already written",
                self.query_id,
                batch_id,
                skipped,
            )

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is in flight (for up to ``timeout_s``), then release the producer (its
        connections, threads and buffers): called when the query stops, so a terminated query
        holds nothing. Spark's py4j callback server may keep this object until the JVM lets go."""
        try:
            self._producer.flush(timeout_s)
        except RuntimeError:
            return  # closed already
        # still unconfirmed: purged (the batch is replayed on a restart), and the close bounded
        close_producer(self._producer, timeout_s)

    def _check_resumable(self, batch_id: int) -> None:
        """A sink starts with the batch its checkpoint replays or runs next, so the query's records
        on the sink come from that batch at most. A later batch there was written by a run whose
        checkpoint this one does not have (servers with their own checkpoint roots, or an older
        copy restored): skipping by batch number would then drop new records and writing would
        repeat old ones, so the batch fails instead, and the query reports why."""
        assert self._written is not None
        ahead = {p: w.batch for p, w in self._written.items() if w.batch > batch_id}
        if ahead:
            self._written = None  # read the tails again on the next attempt
            raise CheckpointBehind(
                f"query {self.query_id}: its output in topic {self.topic} already holds batch "
                f"{max(ahead.values())} (partitions {sorted(ahead)}) but this server's checkpoint "
                f"resumes at batch {batch_id}: the query ran elsewhere with a checkpoint this "
                "server cannot read. Set headwater.query.checkpoint.root to a path every server "
                "of the cluster reaches. Nothing was written (no record lost or written twice)."
            )

    def _rewrite(self, batch_id: int, pause_s: float) -> int:
        """Produce again the records confirmed at offsets their partitions had passed (same key,
        value, timestamp and headers), after ``pause_s``; returns how many."""
        again = list(self._confirmed.suspect)
        log.warning(
            "query %s: the broker confirmed %d record(s) of batch %d at offsets its partitions "
            "had passed (%s): writing them again",
            self.query_id,
            len(again),
            batch_id,
            self._confirmed.describe(),
        )
        self._confirmed.suspect.clear()
        time.sleep(pause_s)
        for message in again:
            self._produce(
                message.topic(),
                message.key(),
                message.value(),
                message.partition(),
                message.timestamp()[1],
                list(message.headers() or ()),
            )
        return len(again)

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int,
        timestamp: int,
        headers: list[tuple[str, str | bytes | None]],
        **delivery: Callable[[KafkaError | None, Any], None],
    ) -> None:
        """Produce one record (``on_delivery``: its own report instead of `_undelivered`)."""
        while True:
            try:
                self._producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    timestamp=timestamp,
                    headers=headers,
                    **delivery,
                )
                return
            except BufferError:
                self._producer.poll(0.05)

    def _processing_error(self, row: Mapping[str, Any], now_ms: int) -> None:
        detail = json.loads(row["value"] or b"{}")
        entry = {
            "LOGGER": f"processing.{self.query_id}",
            "LEVEL": "ERROR",
            "TIME": now_ms,
            "MESSAGE": {
                "TYPE": row["error"],
                "ERRORMESSAGE": detail.get("message") or f"a record failed ({row['error']})",
                "TOPIC": detail.get("topic", ""),
                "PARTITION": row["source_partition"],
                "OFFSET": row["source_offset"],
            },
        }
        with self.stats.lock:
            self.stats.errors += 1
            self.stats.last_error = entry["MESSAGE"]["ERRORMESSAGE"]  # type: ignore[index]
            self.stats.last_error_time_ms = now_ms
        if self._on_error is not None:
            self._on_error(entry)
        if self._log_topic is not None:
            self._produce(  # a processing-log record not confirmed does not fail the batch
                self._log_topic,
                None,
                json.dumps(entry).encode(),
                -1,
                now_ms,
                [],
                on_delivery=lambda _error, _message: None,
            )

    def _read_tails(self) -> dict[int, Written]:
        """This query's last record on every sink partition (read once per sink object, and again
        after a batch failed); each partition's end is where its confirmed offsets must pass."""
        found: dict[int, Written] = {}
        for partition in range(self.partitions):
            last, end = _last_written(self._settings, self.topic, partition, self.query_id)
            self._confirmed.passed(partition, end - 1)
            if last is not None:
                found[partition] = last
        if found:
            log.info("query %s resumes its sink after %s", self.query_id, found)
        return found


class Confirmations:
    """The producer's delivery reports of a batch: failures, and records confirmed at an offset
    not past every offset confirmed before on their partition (``suspect``: a partition's offsets
    only grow, so such a record is not where the broker says). Pure: fed (error, message) pairs.

    Tansu on SeaweedFS confirms records at offsets gone back after a restart: the sink writes
    its suspect records again (Workaround
    "an idempotent producer's records are confirmed at offsets already used after a restart")."""

    __slots__ = ("_top", "failures", "suspect")

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.suspect: list[Any] = []
        self._top: dict[int, int] = {}  # partition -> the highest offset confirmed there

    def passed(self, partition: int, offset: int) -> None:
        """``partition`` is known to hold records up to ``offset``."""
        if offset > self._top.get(partition, -1):
            self._top[partition] = offset

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.failures.append(str(error))
            return
        partition, offset = message.partition(), message.offset()
        top = self._top.get(partition, -1)
        if offset is None or offset <= top:
            self.suspect.append(message)
        else:
            self._top[partition] = offset

    def describe(self) -> str:
        """The suspect records' partitions and offsets, a few."""
        shown = ", ".join(f"[{m.partition()}]@{m.offset()}" for m in self.suspect[:4])
        more = len(self.suspect) - 4
        return (
            shown
            + (f" and {more} more" if more > 0 else "")
            + (" after " + ", ".join(f"[{p}]@{o}" for p, o in sorted(self._top.items())))
        )


@dataclass(frozen=True)
class _Columns:
    """A batch's records in the order they were computed in (an aggregate's batch order, else
    input order: `OutputRecord.order`), as Python lists, one per column the sink reads."""

    key: list[bytes | None]
    value: list[bytes | None]
    partition: list[int]
    timestamp: list[int]
    error: list[str | None]
    source_partition: list[int]
    source_offset: list[int]

    @staticmethod
    def of_table(table: pa.Table | None) -> _Columns:
        """The columns of an Arrow table of `kafka_source.OUTPUT_SCHEMA` or `AGGREGATED_SCHEMA`
        rows (None: an empty batch), sorted stably by `_ORDER` (a column it lacks counts as 0)."""
        if table is None or table.num_rows == 0:
            return _Columns([], [], [], [], [], [], [])
        present = [name for name in _ORDER if name in table.schema.names]
        order = pa.table({name: pc.fill_null(table.column(name), 0) for name in present})
        ordered = table.take(pc.sort_indices(order, sort_keys=[(n, "ascending") for n in present]))
        return _Columns(*(ordered.column(f.name).to_pylist() for f in fields(_Columns)))

    @staticmethod
    def of_rows(rows: Sequence[Mapping[str, Any]]) -> _Columns:
        """The columns of rows (mappings with the same names), sorted stably as `of_table` sorts."""
        ordered = sorted(rows, key=lambda r: tuple(r.get(name) or 0 for name in _ORDER))
        return _Columns(
            [r["key"] for r in ordered],
            [r["value"] for r in ordered],
            [int(r["partition"]) for r in ordered],
            [int(r["timestamp"]) for r in ordered],
            [r["error"] for r in ordered],
            [r["source_partition"] for r in ordered],
            [r["source_offset"] for r in ordered],
        )

    def error_row(self, i: int) -> dict[str, Any]:
        """A skipped record's row: what `ExactlyOnceSink._processing_error` reads."""
        return {
            "value": self.value[i],
            "error": self.error[i],
            "source_partition": self.source_partition[i],
            "source_offset": self.source_offset[i],
        }


#: The columns a batch is sorted by: the order its records were computed in (`OutputRecord.order`).
_ORDER = ("source_rank", "source_partition", "source_offset", "source_seq")


def _last_written(
    settings: KafkaSettings, topic: str, partition: int, query_id: str
) -> tuple[Written | None, int]:
    """The (batch, seq) of the query's last record on the partition, scanning back from the end,
    and that end."""
    reader = consumer(settings, "query-sink-tail", partition_eof=True, fetch_wait_max_ms=100)
    try:
        end = _end_of(reader, topic, partition)
        if end == 0:
            return None, 0  # nothing was ever written there
        window = _TAIL_WINDOW
        while True:
            start = max(0, end - window)
            last = _scan(reader, topic, partition, start, end, query_id.encode())
            if last is not None or start == 0 or window >= _TAIL_MAX:
                return last, end
            window *= 10
    finally:
        reader.close()


def _end_of(reader: Any, topic: str, partition: int) -> int:
    """The partition's end from fetch (read to end of partition from the start: first records
    only, the watermark comes with the first fetch response)."""
    reader.assign([TopicPartition(topic, partition, 0)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # short polls: the watermark is known as soon as the first fetch answers (a 0.2 s poll
        # on an empty partition waited all of it: 0.3 s per partition of a query's first batch)
        reader.consume(1, 0.01)
        _low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if high is not None and high >= 0:
            return int(high)
    raise TimeoutError(f"no fetch answer for {topic}[{partition}] in 30 s")


def _scan(
    reader: Any, topic: str, partition: int, start: int, end: int, query: bytes
) -> Written | None:
    reader.assign([TopicPartition(topic, partition, start)])
    last: Written | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for message in poll_batch(reader, 5000, 0.5):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return last
                continue
            if int(message.offset() or 0) >= end:
                return last
            headers = dict(message.headers() or ())
            if headers.get(QUERY_HEADER) == query:
                found = Written(int(headers[BATCH_HEADER] or 0), int(headers[SEQ_HEADER] or 0))
                # the furthest, not the last: a record written again (`Confirmations`) comes
                # after later ones of its batch
                if last is None or (found.batch, found.seq) > (last.batch, last.seq):
                    last = found
    raise TimeoutError(f"reading the tail of {topic}[{partition}] took over 120 s")
