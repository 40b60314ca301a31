"""Every fetching consumer of this process, so that no topic is deleted while one of them fetches it.

Does no I/O of its own (it calls librdkafka's assign/pause on consumers the caller owns).

Workaround "a topic deleted under a fetching consumer kills the process" (Tansu 0.6 with librdkafka
2.16): once a topic is deleted, the broker answers a pending or later Fetch for it with a leader
hint (KIP-951's CurrentLeader tag) under a zero topic id; librdkafka then looks the topic up by a
NULL name and dies of SIGSEGV in its own thread (``rd_kafka_metadata_update_op`` ->
``rd_kafka_metadata_cache_find`` -> ``strcmp``), taking the whole server with it. A consumer whose
partitions of that topic are paused or unassigned when the deletion happens is not affected, nor is
a producer. So:

- every consumer headwater makes is a :class:`Reader` (``clients.consumer`` builds them, and
  ``tests/test_kafka_ownership.py`` keeps it the only way), which records what it is assigned here;
- a topic is deleted only through ``clients.delete_topics``, which first :func:`retire`\\ s it:
  every reader of it in this process has those partitions paused (under the reader's own lock, so
  never while it is being closed), and the call waits out the fetches already in flight;
- while a topic is retired, an assignment of it is not passed on (the rest of the assignment is),
  and :meth:`Reader.retired` tells an owner that its topic is going away, so it can end cleanly;
- servers of a cluster retire a topic when they apply the DROP ... DELETE TOPIC that will delete it,
  and the server that deletes it first waits for them to have applied it.

On a real Kafka cluster a deleted topic's fetch errors carry no leader hint and nothing crashes; the
pause before a deletion costs a fetch wait there too and is kept as a guard.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

__all__ = ["Reader", "readers_of", "reinstate", "release_holds", "retire", "retired_topics"]

log = logging.getLogger(__name__)

#: librdkafka's default fetch.wait.max.ms: a fetch sent just before a pause is answered within it.
_DEFAULT_FETCH_WAIT_MS = 500
#: Added to the longest fetch wait before a retired topic may be deleted (the answer's way back).
_IN_FLIGHT_MARGIN_S = 0.25


class _Registry:
    """The process's readers and retired topics."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.readers: weakref.WeakSet[Reader] = weakref.WeakSet()
        # topic -> one entry per retirement holding it: None until reinstated, or when it lapses
        self.retired: dict[str, list[float | None]] = {}

    def is_retired(self, topic: str, now: float) -> bool:
        """Whether ``topic`` is retired at ``now`` (monotonic); forgets lapsed retirements."""
        holds = self.retired.get(topic)
        if holds is None:
            return False
        holds[:] = [h for h in holds if h is None or h > now]
        if not holds:
            del self.retired[topic]
            return False
        return True


_registry = _Registry()


class Reader(Consumer):  # type: ignore[misc]  # confluent-kafka's classes are untyped
    """A confluent-kafka Consumer that records its assignment so its topics can be retired.

    Built by ``headwater.kafka.clients.consumer``; owned by one thread, which alone polls and closes
    it. Only :func:`retire` touches it from elsewhere, and only under its lock.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._lock = threading.Lock()
        self._assigned: set[tuple[str, int]] = set()
        self._paused_for: set[str] = set()
        self._closed = False
        self.fetch_wait_ms = int(config.get("fetch.wait.max.ms", _DEFAULT_FETCH_WAIT_MS))
        with _registry.lock:
            _registry.readers.add(self)

    # -- assignment ------------------------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        with _registry.lock, self._lock:
            kept = _without_retired(partitions)
            super().assign(kept)
            self._assigned = {(tp.topic, tp.partition) for tp in kept}

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        with _registry.lock, self._lock:
            kept = _without_retired(partitions)
            if kept:
                super().incremental_assign(kept)
            self._assigned |= {(tp.topic, tp.partition) for tp in kept}

    def unassign(self) -> None:
        with self._lock:
            super().unassign()
            self._assigned.clear()

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        with self._lock:
            held = [tp for tp in partitions if (tp.topic, tp.partition) in self._assigned]
            if held:
                super().incremental_unassign(held)
            self._assigned -= {(tp.topic, tp.partition) for tp in held}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._assigned.clear()
        with _registry.lock:
            _registry.readers.discard(self)
        super().close()

    # -- retirement ------------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """The topics this reader is assigned partitions of."""
        with self._lock:
            return {topic for topic, _partition in self._assigned}

    def retired(self) -> set[str]:
        """The topics of this reader that were retired (they are being deleted): its owner should
        stop reading them. Paused partitions deliver nothing more."""
        with self._lock:
            return set(self._paused_for)

    def _pause_topic(self, topic: str) -> bool:
        """Pause every partition of ``topic`` held here; False when there are none (or closed)."""
        with self._lock:
            if self._closed:
                return False
            held = [TopicPartition(t, p) for t, p in self._assigned if t == topic]
            if not held:
                return False
            super().pause(held)
            self._paused_for.add(topic)
            return True


def _without_retired(partitions: list[TopicPartition]) -> list[TopicPartition]:
    """``partitions`` less those of retired topics (the registry's lock is held)."""
    if not _registry.retired:
        return list(partitions)
    now = time.monotonic()
    retired = {tp.topic for tp in partitions if _registry.is_retired(tp.topic, now)}
    if retired:
        log.info("not reading %s: the topic is being deleted", sorted(retired))
    return [tp for tp in partitions if tp.topic not in retired]


def retire(topics: Iterable[str], *, wait: bool = True, hold_s: float | None = None) -> int:
    """Stop every reader of this process from fetching ``topics``: before they are deleted.

    Pauses the readers' partitions of those topics and keeps new assignments of them from being
    passed on until :func:`reinstate` (or, with ``hold_s``, until that many seconds have passed or
    :func:`release_holds`). With ``wait``, returns only once fetches that may already be in flight,
    here or on a peer that paused its own readers, have been answered (the longest fetch wait,
    librdkafka's default at least, plus a margin).

    Returns:
        How many readers were paused.
    """
    names = set(topics)
    paused: list[Reader] = []
    expiry = None if hold_s is None else time.monotonic() + hold_s
    with _registry.lock:
        for topic in names:
            _registry.retired.setdefault(topic, []).append(expiry)
        readers = list(_registry.readers)
    for reader in readers:
        held = [reader._pause_topic(topic) for topic in names]  # every topic, no short cut
        if any(held):
            paused.append(reader)
    if paused:
        log.info("paused %d reader(s) of %s before its deletion", len(paused), sorted(names))
    if wait:
        longest_ms = max([_DEFAULT_FETCH_WAIT_MS, *(r.fetch_wait_ms for r in paused)])
        time.sleep(longest_ms / 1000 + _IN_FLIGHT_MARGIN_S)
    return len(paused)


def reinstate(topics: Iterable[str]) -> None:
    """Undo one :func:`retire` without ``hold_s`` of each of ``topics`` (after the deletion: a
    topic of the same name may be created later). Readers paused by ``retire`` stay paused."""
    with _registry.lock:
        for topic in set(topics):
            holds = _registry.retired.get(topic, [])
            if None in holds:
                holds.remove(None)
            if not holds:
                _registry.retired.pop(topic, None)


def release_holds(topics: Iterable[str]) -> None:
    """End the retirements with ``hold_s`` of ``topics`` (a source reads the topic again)."""
    with _registry.lock:
        for topic in set(topics):
            holds: list[float | None] = [h for h in _registry.retired.get(topic, []) if h is None]
            if holds:
                _registry.retired[topic] = holds
            else:
                _registry.retired.pop(topic, None)


def retired_topics() -> set[str]:
    """The topics retired now."""
    now = time.monotonic()
    with _registry.lock:
        return {topic for topic in list(_registry.retired) if _registry.is_retired(topic, now)}


def readers_of(topic: str) -> int:
    """How many open readers of this process are assigned partitions of ``topic`` (tests, logs)."""
    with _registry.lock:
        readers = list(_registry.readers)
    return sum(1 for reader in readers if topic in reader.topics())
