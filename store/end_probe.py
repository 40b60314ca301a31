"""Fresh end offsets for bounded pull queries: ends read by a fetch sent after the question. Does I/O.

A replica's lag is its topic's end offset minus its position. The restorer knows the end from its
own consumer's latest fetch response, which may be a fetch or two old: under load on the durable
broker that missed up to 7 records written at 20 records/s (bench.chaos), so an answer claimed a lag
within `acceptable.offset.lag` while the writes acknowledged before it was asked proved more. A
bound is a promise about the moment the query arrived, so a bounded query asks this probe.

`EndProbe.ends` returns, for each partition, the high watermark of a fetch request sent after the
call began: every record acknowledged before the call is below it. One thread and one consumer
serve every caller in rounds (callers waiting together share a round): each round assigns the
wanted partitions one record before their last known end (so the broker answers at once with that
record and the high watermark; Tansu would hold an empty fetch for `fetch.wait.max.ms`), waits
for one record or end-of-partition event of each, and unassigns them. Never ListOffsets (wrong on
Tansu, see docs/embedded-broker.md).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, TopicPartition

from headwater.kafka.clients import KafkaSettings, consumer_config, consumer_from_config
from headwater.kafka.errors import EndOffsetsUnavailable
from headwater.kafka.offsets import cached_end_offsets
from headwater.kafka.readers import Reader

log = logging.getLogger(__name__)

__all__ = ["EndProbe"]

_FETCH_WAIT_MS = 10  # an empty partition's fetch comes back after this long on Tansu
_ROUND_TIMEOUT_S = 2.0
_POLL_S = 0.05

_Key = tuple[str, int]


@dataclass(eq=False)
class _Ask:
    wanted: dict[_Key, int]  # partition -> the last end known (where to read from, less one)
    done: threading.Event = field(default_factory=threading.Event)
    found: dict[_Key, int] = field(default_factory=dict)


#: How often an idle probe checks whether its consumer must be renewed (kafka.readers).
_RENEW_CHECK_S = 0.1


class EndProbe:
    """Reads partitions' current end offsets on demand, for callers in any thread.

    Args:
        kafka: How to reach Kafka.
        purpose: Names the consumer (its client.id suffix).
    """

    def __init__(self, kafka: KafkaSettings, purpose: str = "end-probe") -> None:
        self._kafka, self._purpose = kafka, purpose
        self._asks: queue.SimpleQueue[_Ask | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._recent: dict[_Key, tuple[float, int]] = {}  # the last end read: (monotonic, end)

    def recent(
        self, topic: str, partitions: Iterable[int], max_age_s: float
    ) -> dict[int, int] | None:
        """The ends of `partitions` that a round of this probe read within `max_age_s` (no I/O),
        or None when some partition has none that recent."""
        oldest = time.monotonic() - max_age_s
        with self._lock:
            found = {p: self._recent.get((topic, p)) for p in partitions}
        if any(seen is None or seen[0] < oldest for seen in found.values()):
            return None
        return {p: seen[1] for p, seen in found.items() if seen is not None}

    def ends(self, topic: str, hints: Mapping[int, int], timeout_s: float) -> dict[int, int]:
        """The end offset of each partition in `hints`, from a fetch sent after this call began.

        Args:
            topic: The topic.
            hints: {partition: its last end offset known} (0 when none is known); the probe
                reads from one record before it.
            timeout_s: Longest wait.

        Raises:
            EndOffsetsUnavailable: Some partition gave no fetch response in time (Kafka is
                unreachable, or the partition does not exist).
        """
        ask = _Ask({(topic, p): max(0, int(end)) for p, end in hints.items()})
        if not ask.wanted:
            return {}
        self._ensure_running()
        self._asks.put(ask)
        ask.done.wait(timeout_s)
        missing = tuple(sorted(p for t, p in ask.wanted if (t, p) not in ask.found))
        if missing:
            raise EndOffsetsUnavailable(topic, missing, int(timeout_s * 1000))
        return {p: ask.found[(t, p)] for t, p in ask.wanted}

    def close(self) -> None:
        """Stops the thread and closes the consumer. Idempotent."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._asks.put(None)
            thread.join(_ROUND_TIMEOUT_S + 1)

    def _ensure_running(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(self._reader(),), name=self._purpose, daemon=True
                )
                self._thread.start()

    def _reader(self) -> Reader:
        config = consumer_config(
            self._kafka, self._purpose, partition_eof=True, fetch_wait_max_ms=_FETCH_WAIT_MS
        )
        config["enable.auto.offset.store"] = False  # nothing is ever committed
        return consumer_from_config(config, follows_new_topics=True)

    def _run(self, reader: Reader) -> None:
        try:
            while True:
                if reader.needs_renewal():  # it read a topic that was deleted (kafka.readers)
                    reader.close()
                    reader = self._reader()
                try:
                    first = self._asks.get(timeout=_RENEW_CHECK_S)
                except queue.Empty:
                    continue
                if first is None:
                    return
                asks = [first]
                while True:  # every caller waiting now shares this round
                    try:
                        more = self._asks.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self._answer(reader, asks)
                        return
                    asks.append(more)
                self._answer(reader, asks)
        except Exception:  # the callers time out; the thread must not die silently
            log.exception("the end-offset probe failed")
        finally:
            reader.close()

    def _answer(self, reader: Consumer, asks: list[_Ask]) -> None:
        wanted: dict[_Key, int] = {}
        for ask in asks:
            for key, end in ask.wanted.items():
                wanted[key] = max(wanted.get(key, 0), end)
        asked = time.monotonic()  # every end read below is at least this recent
        found = _round(reader, wanted)
        with self._lock:
            self._recent.update({key: (asked, end) for key, end in found.items()})
        for ask in asks:
            ask.found.update({k: found[k] for k in ask.wanted if k in found})
            ask.done.set()


def _round(reader: Consumer, wanted: Mapping[_Key, int]) -> dict[_Key, int]:
    """Assigns `wanted` one record before each end, reads each partition's high watermark from its
    first fetch response, unassigns. Partitions that gave none within the round are left out."""
    reader.assign([TopicPartition(t, p, max(0, end - 1)) for (t, p), end in wanted.items()])
    found: dict[_Key, int] = {}
    deadline = time.monotonic() + _ROUND_TIMEOUT_S
    try:
        while len(found) < len(wanted) and time.monotonic() < deadline:
            message = reader.poll(_POLL_S)
            if message is None:
                continue
            key = (message.topic() or "", message.partition() or 0)
            if key not in wanted or key in found:
                continue
            error = message.error()
            if error is None:
                high = cached_end_offsets(reader, key[0], [key[1]]).get(key[1], 0)
                found[key] = max(high, (message.offset() or 0) + 1)
            elif error.code() == KafkaError._PARTITION_EOF:
                found[key] = int(message.offset() or 0)
            else:
                log.debug("end-offset probe of %s[%d]: %s", key[0], key[1], error.str())
    finally:
        reader.unassign()
    return found
