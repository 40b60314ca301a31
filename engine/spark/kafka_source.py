"""Kafka as a Spark streaming source: a Python data source over confluent-kafka. Does I/O.

- **Offsets.** The stream offset is ``{"<partition>": next offset}`` per Kafka partition; each
  micro-batch has one input partition per Kafka partition with records in ``[start, end)``.
- **End offsets** come from fetch responses, never from ListOffsets (wrong on the embedded broker:
  docs/embedded-broker.md): a probe consumer sits at the end of every partition, and each
  `latestOffset` call polls it briefly and reads the high watermarks its fetches cached. While
  nothing arrives that poll is all an idle query costs.
- **Admission control.** ``maxRecordsPerBatch`` caps the records of one micro-batch (spread over
  partitions in proportion to what each has waiting, never starving one).
- **Reading.** Records are read ``read_committed``; a record past ``end`` (or the end of the
  partition: transaction markers take offsets) ends the input partition.
- **Operators.** With the ``query`` option (a `QueryPayload` as JSON), each input partition runs the
  query's first stage over what it reads, inside the Spark task (`source_rows`, imported there
  only: Spark's streaming source runner, one Python process per query source, plans offsets and
  never loads the operators); without it, the raw records.

The reader is pickled to Spark's Python workers, so everything it holds is plain data; consumers
live in a per-process cache.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from headwater.engine.spark.file_change import FileChange, changed_at
from headwater.engine.spark.packed import PACKED_SCHEMA
from headwater.engine.spark.schemas import ENTRY_SCHEMA, GROUPED_SCHEMA, RAW_SCHEMA
from headwater.engine.spark.shared_ends import read_shared_ends
from headwater.kafka.clients import KafkaSettings, consumer, poll_batch

NAME = "headwater-kafka"

_POLL_BATCH = 5000
_READ_FETCH_WAIT_MS = 100  # catching up: long fetches (short ones crawl over one-record batches)
_OUT_OF_RANGE_PAUSE_S = 0.2  # between fetches the broker answered "offset out of range"
_PROBE_FETCH_WAIT_MS = 10  # the broker may hold a probe's fetch this long (Tansu always does)


@dataclass(frozen=True, slots=True)
class _Range(InputPartition):
    partition: int
    start: int
    end: int


class KafkaDataSource(DataSource):
    """``spark.readStream.format("headwater-kafka")``; options: ``bootstrap.servers``, ``topic``,
    ``partitions``, ``kafka.config`` (JSON of librdkafka settings), ``maxRecordsPerBatch``,
    ``query`` (JSON: query id and the catalog objects it needs), ``endsFile`` (`shared_ends`),
    ``idleWaitMs`` (how long ``latestOffset`` may hold its answer while nothing new arrives)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        if not self.options.get("query"):
            return RAW_SCHEMA
        if self.options.get("output") == "grouped":
            return GROUPED_SCHEMA
        if self.options.get("output") == "join":
            return ENTRY_SCHEMA
        return PACKED_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        # Spark hands options in a case-insensitive dict that keeps its keys lower-cased: plain
        # data for the workers, read by lower-case names.
        return KafkaStreamReader({k.lower(): v for k, v in self.options.items()})


class KafkaStreamReader(DataSourceStreamReader):
    """The stream reader (see the module docstring)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        self.topic = options["topic"]
        self.partition_count = int(options["partitions"])
        self.max_records = int(options.get("maxrecordsperbatch", "0") or 0)
        self.idle_wait_s = int(options.get("idlewaitms", "0") or 0) / 1000
        self._shared_once = False  # the end watcher's file has answered (`_ends`)

    # -- driver side (Spark's Python planner process) --------------------------------------------

    def initialOffset(self) -> dict[str, int]:
        """Each partition's beginning, or the offsets the query was given (a push query's: the
        ends as of its request)."""
        given = json.loads(self.options.get("startingoffsets") or "{}")
        return {str(p): int(given.get(str(p), 0)) for p in range(self.partition_count)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        ends = self._ends(start)
        waiting = _waiting(start, ends)
        if not sum(waiting.values()) and self._shared_once and self.idle_wait_s > 0:
            waiting = self._wait_for_records(start)
        total = sum(waiting.values())
        if not total:
            return start
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else total
        if total <= cap:
            return {p: int(start[p]) + n for p, n in waiting.items()}
        # Over the cap: every partition with records waiting gets its share, at least one.
        return {
            p: int(start[p]) + (max(1, n * cap // total) if n else 0) for p, n in waiting.items()
        }

    def _wait_for_records(self, start: dict[str, int]) -> dict[str, int]:
        """Nothing new: hold the answer up to the ``idleWaitMs`` option, until the end watcher
        replaces its file with ends past ``start`` (`file_change`: no wake-up while it does not).
        Spark asks
        again at once when a trigger found nothing, so an idle query used to cost a trigger every
        100 ms (the JVM's planning and this process's round trip); held, two a second, and new
        records are taken up as soon as the watcher sees them instead of at the next trigger."""
        path = self.options["endsfile"]
        deadline = time.monotonic() + self.idle_wait_s
        change = _file_change(path)
        seen = changed_at(path)
        waiting: dict[str, int] = {p: 0 for p in start}
        # The ends `latestOffset` read may be older than the file ``seen`` stamps: replaced in
        # between, the file would wake no one, and new records waited the whole idle wait (1.1 s
        # stalls, ~1 in 100 records at 10 records/s: bench.persistent_queries' p99). Read anew.
        shared = read_shared_ends(path, self.topic, self.partition_count)
        if shared is None:
            return waiting
        waiting = _waiting(start, shared)
        while not sum(waiting.values()) and (left := deadline - time.monotonic()) > 0:
            now_at = change.wait(seen, left)
            if now_at == seen:
                continue
            seen = now_at
            shared = read_shared_ends(path, self.topic, self.partition_count)
            if shared is None:  # stale or gone: `_ends` falls back to the probe next time
                break
            waiting = _waiting(start, shared)
        return waiting

    def _ends(self, start: dict[str, int]) -> dict[str, int]:
        """The partitions' ends: from the server's end watcher (`shared_ends`), or, while its file
        is stale or does not know the topic yet (waiting up to a second the first time), from this
        source's own consumer at the end."""
        path = self.options.get("endsfile")
        if path:
            deadline = time.monotonic() + (0.0 if self._shared_once else 1.0)
            while True:
                shared = read_shared_ends(path, self.topic, self.partition_count)
                if shared is not None:
                    self._shared_once = True
                    _close_probe(self.options)  # a fallback's consumer, if it had one
                    return shared
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
        return _probe(self.options).ends(self.topic, self.partition_count, start)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [
            _Range(int(p), int(start[p]), int(end[p]))
            for p in sorted(end, key=int)
            if int(end[p]) > int(start.get(p, 0))
        ]

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        _close_probe(self.options)

    # -- worker side (one task per Kafka partition) -----------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Range)
        # The operators are imported here, in the worker: a streaming source runner (one process
        # per query source, which only plans offsets) started without the fork server never loads
        # them (~50 MB less each); forked from it, runners and workers share its loaded copy.
        from headwater.engine.spark.source_rows import rows_of

        records = _read_range(self.options, self.topic, partition)
        yield from rows_of(self.options, records)


def _waiting(start: Mapping[str, int], ends: Mapping[str, int]) -> dict[str, int]:
    """Records waiting per partition between ``start`` and ``ends``."""
    return {p: max(0, ends.get(p, int(start[p])) - int(start[p])) for p in start}


# -- per-process caches ---------------------------------------------------------------------------

_lock = threading.Lock()
_probes: dict[str, _EndProbe] = {}
_file_changes: dict[str, FileChange] = {}  # ends file -> its watch, one per process
_readers: dict[str, tuple[Consumer, float]] = {}  # key -> (consumer, when it was given back)
#: A cached consumer unused this long is closed (its query may be terminated: Spark's workers
#: outlive queries and never hear of it): a connection and librdkafka's threads given back.
_READER_IDLE_S = 120.0


def _file_change(path: str) -> FileChange:
    with _lock:
        found = _file_changes.get(path)
        if found is None:
            found = _file_changes[path] = FileChange(path)
    return found


def settings_of(options: Mapping[str, str]) -> KafkaSettings:
    """The Kafka settings the options carry."""
    extra = json.loads(options.get("kafka.config") or "{}")
    return KafkaSettings(options["bootstrap.servers"], client_config=extra)


def _reader(options: Mapping[str, str], topic: str, partition: int) -> Consumer:
    """This worker's consumer of one partition, kept between micro-batches (Spark reuses its
    Python workers): a new consumer costs a connection and a first fetch per batch."""
    key = json.dumps([options["bootstrap.servers"], topic, partition])
    now = time.monotonic()
    with _lock:
        kept = _readers.pop(key, None)
        idle = [k for k, (_, since) in _readers.items() if now - since > _READER_IDLE_S]
        expired = [_readers.pop(k)[0] for k in idle]
    for old in expired:
        old.close()
    found = kept[0] if kept is not None else None
    if found is None:
        found = consumer(
            settings_of(options),
            "query-source",
            read_committed=True,
            partition_eof=True,
            fetch_wait_max_ms=_READ_FETCH_WAIT_MS,
            strict_offsets=True,
        )
    return found


def _give_back(options: Mapping[str, str], topic: str, partition: int, reader: Consumer) -> None:
    # Unassigned, a kept consumer stops fetching: idle, it costs a connection, not a core's 5%.
    reader.unassign()
    key = json.dumps([options["bootstrap.servers"], topic, partition])
    with _lock:
        spare, _since = _readers.setdefault(key, (reader, time.monotonic()))
    if spare is not reader:
        reader.close()


def _read_range(options: Mapping[str, str], topic: str, r: _Range) -> Iterator[Any]:
    """The records of ``r`` as `InputRecord`s (in a worker: the operators' module is loaded)."""
    from headwater.engine.persistent.query_run import InputRecord

    reader = _reader(options, topic, r.partition)
    healthy = False
    try:
        reader.assign([TopicPartition(topic, r.partition, r.start)])
        position = r.start
        idle_since = time.monotonic()
        doubted: int | None = None  # where an end past undelivered records was last heard
        while position < r.end:
            messages = poll_batch(reader, _POLL_BATCH, 1.0)
            if not messages and time.monotonic() - idle_since > 60:
                raise TimeoutError(
                    f"{topic}[{r.partition}]: no record for 60 s at offset "
                    f"{position}, below the planned end {r.end}"
                )
            for message in messages:
                if position >= r.end:
                    break  # what was fetched past the range is the next range's
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if (message.offset() or 0) < r.end:
                            continue  # EOF of an older fetch: the records up to end are coming
                        if doubted == position:
                            position = r.end  # said again after fetching afresh: a gap
                            break
                        # The end lies past records this read has not had. Either offsets
                        # there hold none (transaction markers, aborted records), or the
                        # event is stale: a kept consumer's earlier assignment had fetched
                        # ahead (the chaos soak lost records so, around a broker restart).
                        # Fetch again from here: a gap says the same end again, with
                        # nothing before it; a stale end is followed by the records.
                        doubted = position
                        _refetch(reader, topic, r.partition, position)
                        continue
                    if error.code() == KafkaError._AUTO_OFFSET_RESET:
                        # The broker said our offset is out of range: a restarting broker does
                        # for offsets it holds. The reader stopped there (strict offsets: no
                        # jump to either end); ask again shortly, within the 60 s above.
                        time.sleep(_OUT_OF_RANGE_PAUSE_S)
                        _refetch(reader, topic, r.partition, position)
                        break
                    raise RuntimeError(f"reading {topic}[{r.partition}]: {error}")
                offset = int(message.offset() or 0)
                if offset < position:
                    continue  # fetched again after a seek: this read has had it
                if offset >= r.end:
                    position = r.end
                    break
                idle_since = time.monotonic()
                position = offset + 1
                yield InputRecord(
                    message.key(),
                    message.value(),
                    int(message.timestamp()[1]),
                    r.partition,
                    offset,
                    _headers(message.headers()),
                )
        healthy = True
    finally:
        if healthy:
            _give_back(options, topic, r.partition, reader)
        else:
            reader.close()


def _refetch(reader: Consumer, topic: str, partition: int, offset: int) -> None:
    """The reader fetching ``topic[partition]`` from ``offset`` again, its fetched records and
    events dropped (seek, or assign where the partition is not fetching yet)."""
    try:
        reader.seek(TopicPartition(topic, partition, offset))
    except KafkaException:
        reader.assign([TopicPartition(topic, partition, offset)])


def _headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    """Record headers as (key, bytes) pairs (librdkafka gives str values when they were str)."""
    if not raw:  # most records: building an empty tuple from a generator was 3% of a worker
        return ()
    return tuple((str(k), v.encode() if isinstance(v, str) else v) for k, v in raw or ())


class _EndProbe:
    """A consumer parked at the end of every partition: its fetches carry the high watermarks."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._consumer: Consumer = consumer(
            settings_of(options), "query-end-probe", fetch_wait_max_ms=_PROBE_FETCH_WAIT_MS
        )
        self._assigned: set[int] = set()
        self._ends: dict[int, int] = {}

    def ends(self, topic: str, partitions: int, start: Mapping[str, Any]) -> dict[str, int]:
        missing = [p for p in range(partitions) if p not in self._assigned]
        if missing:
            # Parked at "the end" as ListOffsets tells it: possibly wrong (the embedded broker),
            # but only where the probe starts reading; the ends come from its fetches.
            for p in missing:
                self._ends[p] = int(start.get(str(p), 0))
            self._consumer.incremental_assign(
                [TopicPartition(topic, p, OFFSET_END) for p in missing]
            )
            self._assigned.update(missing)
        # Take what its fetches brought (waiting, the first time, until every partition has
        # answered once). The probe keeps fetching between calls, ~5% of a core per idle query:
        # pausing it between calls doubled the latency (a resumed consumer fetches late), and a
        # long poll here cost more (Spark waits busily for the answer). Measured, not guessed.
        deadline = time.monotonic() + (1.0 if missing else 0.0)
        answered: set[int] = set()
        while True:
            for message in poll_batch(self._consumer, 10_000, 0.005):
                if message.error() is None:
                    p = int(message.partition() or 0)
                    self._ends[p] = max(self._ends.get(p, 0), int(message.offset() or 0) + 1)
            for p in range(partitions):
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, p), cached=True
                )
                if high is not None and high >= 0:
                    self._ends[p] = max(self._ends.get(p, 0), int(high))
                    answered.add(p)
            if time.monotonic() >= deadline or len(answered) == partitions:
                break  # (waiting the whole second cost every query's start 1 s)
        return {str(p): self._ends[p] for p in range(partitions)}

    def close(self) -> None:
        self._consumer.close()


def _probe(options: Mapping[str, str]) -> _EndProbe:
    key = json.dumps([options["bootstrap.servers"], options["topic"], options.get("queryid", "")])
    with _lock:
        probe = _probes.get(key)
        if probe is None:
            probe = _probes[key] = _EndProbe(options)
        return probe


def _close_probe(options: Mapping[str, str]) -> None:
    key = json.dumps([options["bootstrap.servers"], options["topic"], options.get("queryid", "")])
    with _lock:
        probe = _probes.pop(key, None)
    if probe is not None:
        probe.close()
