"""One consumer watches the end of every source partition for all of a server's queries. Does I/O.

Spark asks each query's source for its latest offsets every trigger (100 ms), in the query's own
streaming source runner process. Each runner used to keep its own consumer parked at the end of
its partitions, fetching continuously (on the embedded broker a fetch is held for its whole wait,
10 ms here): ten idle queries cost ~45% of a core in those fetches alone (`bench.persistent_queries`).
Now the Spark child process runs one `EndWatch` (one consumer for every partition of every topic its
queries read); it writes the ends its fetches bring (messages read at the end, and the high
watermarks each fetch response carries, never ListOffsets: docs/embedded-broker.md) to a small JSON
file, at once when an end moves and at least every `HEARTBEAT_S`; each runner reads that file
(`shared_ends`). A runner that finds the file stale, or without its topic, falls back to its own
consumer (`kafka_source`), so a stuck watcher slows nothing down for long.

The watcher follows exactly the topics of the running queries (`EndWatch.follow`, called by the
driver as queries start and stop), with a new consumer each time they change and none while there
are none: a topic whose queries were terminated is let go before the stop returns, as the runners'
own consumers were closed, and no consumer outlives the set of queries it served (on the embedded
broker a consumer fetching a deleted topic, or one that knew a topic deleted and created again,
kills its process: kafka/readers.py). A topic deleted while other queries keep the watcher alive
is the hazard the runners' own consumers had too.

The records the watcher reads are the newest of their partitions, so it also keeps, per partition,
samples of (offset, timestamp) of them (at most one per `_SAMPLE_EVERY_S`; at most `_SAMPLES_KEPT`:
when full, every other one is dropped, so memory stays bounded while the samples still reach back
to the first, older ones further apart, and a query far behind still has a lag) for the
event-time lag of each query (`EndWatch.time_lags`, ``/metrics``): the newest sample's timestamp
minus that of the first record the query has not read, estimated by the last sample at or before
it (`event_time_lag_ms`: never under-stated for producers whose timestamps grow; unknown, never
guessed, when the query reads records older than every sample).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TIMESTAMP_NOT_AVAILABLE, KafkaException, TopicPartition

from headwater.kafka.clients import KafkaSettings, consumer, poll_batch

log = logging.getLogger(__name__)

#: The longest the watcher goes without writing the file (a runner takes an older one as stale;
#: each write wakes every idle query's source runner: `kafka_source`).
HEARTBEAT_S = 1.0
#: How old a file a runner still trusts.
MAX_AGE_S = 2.0
_FETCH_WAIT_MS = 10  # as the runners' own consumers: the broker holds a fetch this long
_APPLY_TIMEOUT_S = 2.0
_POLL_S = 0.02  # busy: at most one look at the ends per this
#: Idle: how long one poll waits for a record. It returns as soon as one arrives, so this only
#: spaces out the wake-ups while none does (each costs ~0.1 ms of CPU here: 50 a second were 0.6%
#: of a core); an end that moves without a record (past a transaction marker) is seen up to this
#: much later.
_IDLE_POLL_S = 0.2
#: At most one (offset, timestamp) sample per partition per this (`takes_sample`).
_SAMPLE_EVERY_S = 0.25
#: Samples kept per partition at most: a bound on memory. When full, every other one is dropped
#: (the first kept), so they reach back to the first, older ones further apart (`thinned`).
_SAMPLES_KEPT = 512


def ends_text(ends: Mapping[str, Mapping[int, int]], now: float) -> str:
    """The file's text: when it was written (epoch seconds) and topic -> partition -> end."""
    return json.dumps(
        {
            "at": now,
            "ends": {t: {str(p): e for p, e in sorted(ps.items())} for t, ps in ends.items()},
        }
    )


def shared_ends(text: str, topic: str, partitions: int, now: float) -> dict[str, int] | None:
    """``{partition: end}`` of ``topic`` from the file's text, or None when the file is older than
    `MAX_AGE_S`, malformed, or does not know every partition of the topic yet."""
    try:
        body = json.loads(text)
        if now - float(body["at"]) > MAX_AGE_S:
            return None
        known = body["ends"].get(topic) or {}
        ends = {str(p): int(known[str(p)]) for p in range(partitions)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return ends


def event_time_lag_ms(samples: Sequence[tuple[int, int]], position: int, end: int) -> int | None:
    """How far behind in event time a reader at offset ``position`` of a partition ending at
    ``end`` is, in ms: 0 when caught up (``position >= end``); else the newest sample's timestamp
    minus the timestamp of the record at ``position``, estimated by the last sample at or before it
    (later records' timestamps are usually no lower, so the lag is never under-stated for ordinary
    producers), at least 0 (producer timestamps out of order). None when no sample is at or before
    ``position`` (or none at all): the lag is unknown.

    ``samples`` are (offset, timestamp ms) of records of the partition, ascending by offset."""
    if position >= end:
        return 0
    at = bisect_right(samples, position, key=_offset_of)  # samples[at - 1]: the last <= position
    if at == 0:
        return None
    return max(0, samples[-1][1] - samples[at - 1][1])


def _offset_of(sample: tuple[int, int]) -> int:
    return sample[0]


def thinned(samples: list[tuple[int, int]], most: int = _SAMPLES_KEPT) -> list[tuple[int, int]]:
    """``samples`` with every other one dropped (the first kept) when they hold ``most`` or more:
    a partition's history keeps its reach in half the memory."""
    if len(samples) < most:
        return samples
    return samples[::2]


def takes_sample(last: tuple[int, float] | None, offset: int, now: float) -> bool:
    """Whether a record at ``offset`` read at (monotonic) ``now`` becomes a new sample of its
    partition, given the offset and time of the last sample (None: none yet, always taken): only a
    later offset, and no sooner than `_SAMPLE_EVERY_S` after the last."""
    if last is None:
        return True
    last_offset, last_at = last
    return offset > last_offset and now - last_at >= _SAMPLE_EVERY_S


class _Samples:
    """A partition's samples (offset, timestamp ms), ascending, and when the last was taken."""

    __slots__ = ("at", "taken")

    def __init__(self) -> None:
        self.taken: list[tuple[int, int]] = []  # at most _SAMPLES_KEPT (`thinned`)
        self.at = 0.0


def read_shared_ends(path: str, topic: str, partitions: int) -> dict[str, int] | None:
    """`shared_ends` of the file at ``path`` (None when it cannot be read)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    return shared_ends(text, topic, partitions, time.time())


class EndWatch:
    """The end watcher of a Spark child process (see the module docstring)."""

    def __init__(self, kafka: KafkaSettings, path: Path) -> None:
        self.path = path
        self._kafka = kafka
        self._lock = threading.Lock()
        self._wanted: dict[str, int] = {}
        self._latest: dict[str, dict[int, int]] = {}
        # topic -> partition -> samples: written by `_run`, read by `time_lags`, under `_lock`
        self._samples: dict[str, dict[int, _Samples]] = {}
        self._applied = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="end-watch", daemon=True)
        self._thread.start()

    def follow(self, topics: Mapping[str, int]) -> None:
        """Watch exactly ``topics`` (topic -> partitions) from now on; returns once the watcher
        has (un)assigned them, or after a short timeout."""
        with self._lock:
            if dict(topics) == self._wanted:
                return
            self._wanted = dict(topics)
            self._applied.clear()
        if not self._applied.wait(_APPLY_TIMEOUT_S):
            log.warning("the end watcher did not take up its topics in %.0f s", _APPLY_TIMEOUT_S)

    def ends(self) -> dict[str, dict[int, int]]:
        """The ends last seen: topic -> partition -> end offset (a copy)."""
        with self._lock:
            return {topic: dict(ends) for topic, ends in self._latest.items()}

    def time_lags(self, processed: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
        """A query's event-time lag (`event_time_lag_ms`) from the positions it reads next
        (topic -> partition -> offset, ``processed``): topic -> partition -> lag ms, leaving out
        partitions whose end or lag is unknown (and topics left without any)."""
        lags: dict[str, dict[str, int]] = {}
        with self._lock:
            for topic, positions in processed.items():
                ends = self._latest.get(topic, {})
                samples = self._samples.get(topic, {})
                for partition, position in positions.items():
                    end = ends.get(int(partition))
                    if end is None:
                        continue
                    taken = samples.get(int(partition))
                    lag = event_time_lag_ms(taken.taken if taken else (), position, end)
                    if lag is not None:
                        lags.setdefault(topic, {})[partition] = lag
        return lags

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        try:
            self.path.unlink()
        except OSError:
            pass

    def _run(self) -> None:
        reader: Any = None
        watching: dict[str, int] = {}
        ends: dict[str, dict[int, int]] = {}
        written_at = 0.0
        try:
            while not self._stopping.is_set():
                with self._lock:
                    wanted = dict(self._wanted)
                if wanted != watching:
                    # A new consumer for every change of the topics, none while none is wanted:
                    # on the embedded broker a client that knew a topic dies when the topic is
                    # deleted and created again (kafka/readers.py), and every client learns
                    # every topic from its first metadata answer. Renewed this way the watcher
                    # lives no longer than the set of queries it serves, like the consumers the
                    # queries' runners had (bench.drop_cleanup: the Spark child died in 3 of 4
                    # repetitions while one consumer lived on).
                    if reader is not None:
                        reader.close()
                        reader = None
                    for topic in [t for t in ends if t not in wanted]:
                        del ends[topic]
                    with self._lock:
                        for topic in [t for t in self._samples if t not in wanted]:
                            del self._samples[topic]
                    if wanted:
                        reader = consumer(
                            self._kafka, "query-end-watch", fetch_wait_max_ms=_FETCH_WAIT_MS
                        )
                        # parked at "the end" as ListOffsets tells it (possibly wrong: only where
                        # it starts reading); the ends come from its fetches
                        reader.assign(
                            [
                                TopicPartition(t, p, OFFSET_END)
                                for t, n in wanted.items()
                                for p in range(n)
                            ]
                        )
                    watching = wanted
                    _write_atomically(self.path, ends_text(ends, time.time()))
                    self._applied.set()
                if reader is None or not watching:
                    self._applied.set()
                    self._stopping.wait(0.05)
                    continue
                began = time.monotonic()
                moved = _take_ends(reader, watching, ends, self._sample)
                # a poll answered at once (records arriving) still waits out the poll's time
                self._stopping.wait(max(0.0, _POLL_S - (time.monotonic() - began)))
                now = time.time()
                if moved or now - written_at >= HEARTBEAT_S:
                    _write_atomically(self.path, ends_text(ends, now))
                    written_at = now
                    with self._lock:
                        self._latest = {topic: dict(known) for topic, known in ends.items()}
        except Exception:
            log.exception("the end watcher stopped; queries fall back to their own consumers")
        finally:
            if reader is not None:
                reader.close()

    def _sample(self, topic: str, partition: int, offset: int, timestamp_ms: int) -> None:
        """Keeps (offset, timestamp) of a record read, as a sample when `takes_sample` says so."""
        now = time.monotonic()
        with self._lock:
            samples = self._samples.setdefault(topic, {}).setdefault(partition, _Samples())
            last = (samples.taken[-1][0], samples.at) if samples.taken else None
            if takes_sample(last, offset, now):
                samples.taken = thinned(samples.taken)
                samples.taken.append((offset, timestamp_ms))
                samples.at = now


def _take_ends(
    reader: Any,
    watching: dict[str, int],
    ends: dict[str, dict[int, int]],
    sample: Callable[[str, int, int, int], None] | None = None,
) -> bool:
    """Polls once; records the ends that fetches brought, then skips to them. True when one
    moved. Each record read with a timestamp goes to ``sample`` (topic, partition, offset, ms)."""
    moved = False
    # a poll returns as soon as a record is there: a longer timeout only means fewer wake-ups
    # while nothing arrives (an end that moves without a record, past a transaction marker, is
    # seen up to this much later). One record: the ends are the fetches' high watermarks, and
    # reading every record of a busy topic to learn them was the Spark child's largest cost
    # (bench.profile_queries: 18% of the server's Python samples).
    for message in poll_batch(reader, 1, _IDLE_POLL_S):
        if message.error() is None:
            topic, p = str(message.topic()), int(message.partition() or 0)
            if topic in watching:
                known = ends.setdefault(topic, {})
                offset = int(message.offset() or 0)
                if offset + 1 > known.get(p, -1):
                    known[p], moved = offset + 1, True
                kind, timestamp_ms = message.timestamp()
                if sample is not None and kind != TIMESTAMP_NOT_AVAILABLE and timestamp_ms >= 0:
                    sample(topic, p, offset, int(timestamp_ms))
    for topic, partitions in watching.items():
        known = ends.setdefault(topic, {})
        for p in range(partitions):
            _low, high = reader.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            if high is not None and high >= 0 and high > known.get(p, -1):
                known[p], moved = int(high), True
    _skip_to_ends(reader, watching, ends)
    return moved


def _skip_to_ends(reader: Any, watching: dict[str, int], ends: dict[str, dict[int, int]]) -> None:
    """Moves the reader to the ends it knows where it is behind them: what it fetched up to there
    is dropped unread, and its next fetches start at the end, bringing the next high watermarks."""
    positions = reader.position(
        [TopicPartition(t, p) for t, n in watching.items() for p in range(n)]
    )
    for tp in positions:
        end = ends.get(tp.topic, {}).get(tp.partition)
        if end is not None and 0 <= tp.offset < end:
            try:
                reader.seek(TopicPartition(tp.topic, tp.partition, end))
            except KafkaException:  # not fetching yet (or being let go): the next poll tries
                pass


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
