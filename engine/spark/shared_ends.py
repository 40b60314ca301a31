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
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

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
                moved = _take_ends(reader, watching, ends)
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


def _take_ends(reader: Any, watching: dict[str, int], ends: dict[str, dict[int, int]]) -> bool:
    """Polls once; records the ends that fetches brought, then skips to them. True when one
    moved."""
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
                end = int(message.offset() or 0) + 1
                if end > known.get(p, -1):
                    known[p], moved = end, True
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
