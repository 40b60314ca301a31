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
  ``tests/kafka/test_kafka_ownership.py`` keeps it the only way), which records what it is assigned here;
- a topic is deleted only through ``clients.delete_topics``, which first :func:`retire`\\ s it:
  every reader of it in this process has those partitions paused (under the reader's own lock, so
  never while it is being closed), and the call waits out the fetches already in flight;
- while a topic is retired, an assignment of it is not passed on (the rest of the assignment is),
  and :meth:`Reader.retired` tells an owner that its topic is going away, so it can end cleanly;
- a client that knew a topic dies too when a topic of that name is created again and it fetches
  it (a stale topic id), even one no longer assigned it. Once a deletion is noted
  (:func:`note_deleted`), a reader that was assigned the topic, and every reader that follows new
  topics (the restorer's and the end probe's: a client made while the old topic existed may hold its
  id, as the embedded broker names every topic in its first metadata answer), "needs renewal": its
  owner closes it and reads on with a new one, and ``create_topic`` waits for that. A reader never
  polls while it has nothing assigned (an idle consumer that polls learns every topic);
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

from confluent_kafka import Consumer, Message, TopicPartition

__all__ = [
    "Reader",
    "note_deleted",
    "readers_of",
    "reinstate",
    "release_holds",
    "retire",
    "retired_topics",
    "wait_renewed",
]

log = logging.getLogger(__name__)

#: librdkafka's default fetch.wait.max.ms: a fetch sent just before a pause is answered within it.
_DEFAULT_FETCH_WAIT_MS = 500
#: Added to the longest fetch wait before a retired topic may be deleted: librdkafka applies a pause
#: on its broker thread a moment later, and the answer needs its way back (generous on 2 busy cores).
_IN_FLIGHT_MARGIN_S = 1.0


class _Registry:
    """The process's readers and retired topics."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.readers: weakref.WeakSet[Reader] = weakref.WeakSet()
        # topic -> one entry per retirement holding it: None until reinstated, or when it lapses
        self.retired: dict[str, list[float | None]] = {}
        self.deleted: dict[str, float] = {}  # topic -> when its deletion was seen (monotonic)

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


class Reader(Consumer):
    """A confluent-kafka Consumer that records its assignment so its topics can be retired.

    Built by ``headwater.kafka.clients.consumer``; owned by one thread, which alone polls and closes
    it. Only :func:`retire` touches it from elsewhere, and only under its lock.
    """

    def __init__(self, config: dict[str, Any], *, follows_new_topics: bool = False) -> None:
        super().__init__(config)
        self._created = time.monotonic()
        self.follows_new_topics = follows_new_topics
        self._lock = threading.Lock()
        self._assigned: set[tuple[str, int]] = set()
        self._known: set[str] = set()  # every topic it was ever assigned
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
            self._known |= {tp.topic for tp in kept}
            self._resume_reassigned(kept)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        with _registry.lock, self._lock:
            kept = _without_retired(partitions)
            if kept:
                super().incremental_assign(kept)
            self._assigned |= {(tp.topic, tp.partition) for tp in kept}
            self._known |= {tp.topic for tp in kept}
            self._resume_reassigned(kept)

    def _resume_reassigned(self, partitions: list[TopicPartition]) -> None:
        """librdkafka keeps a partition paused across unassign and assign: one :func:`retire`
        paused is resumed when it is assigned again (its topic is no longer retired by then)."""
        again = [tp for tp in partitions if tp.topic in self._paused_for]
        if again:
            super().resume([TopicPartition(tp.topic, tp.partition) for tp in again])
            self._paused_for -= {tp.topic for tp in again}

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

    # -- reading -----------------------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> Message | None:
        """As Consumer.poll; with nothing assigned it only waits: an idle consumer that polls
        learns every topic of the cluster (full metadata), and would die when one of them is
        deleted and created again."""
        if not self._assigned:
            time.sleep(max(0.0, timeout))
            return None
        return super().poll(timeout)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """As Consumer.consume; with nothing assigned it only waits (see :meth:`poll`)."""
        if not self._assigned:
            time.sleep(max(0.0, timeout))
            return []
        return list(super().consume(num_messages, timeout))

    # -- retirement ------------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """The topics this reader is assigned partitions of."""
        with self._lock:
            return {topic for topic, _partition in self._assigned}

    def needs_renewal(self) -> bool:
        """Whether a topic was deleted (:func:`note_deleted`) since this reader was made that it
        read, or that it may have learnt (``follows_new_topics``: a reader that is assigned new
        topics over its life, whose metadata cache may hold the old topic): its owner must close it
        and read on with a new one, because librdkafka kills the process when a topic of that name
        is created again and such a client fetches it."""
        with self._lock:
            return bool(self._outdated_locked())

    def outdated(self) -> set[str]:
        """The deleted topics this reader knew (see :meth:`needs_renewal`)."""
        with self._lock:
            return self._outdated_locked()

    def _outdated_locked(self) -> set[str]:
        with _registry.lock:
            deleted = [t for t, when in _registry.deleted.items() if when > self._created]
        return {t for t in deleted if self.follows_new_topics or t in self._known}

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


def note_deleted(topics: Iterable[str]) -> None:
    """``topics`` were deleted (seen now): readers that read them, and readers that follow new
    topics (created before now), need renewal before a topic of such a name is created again."""
    now = time.monotonic()
    with _registry.lock:
        for topic in topics:
            _registry.deleted[topic] = now


def wait_renewed(topics: Iterable[str], timeout_s: float) -> bool:
    """Wait until no open reader of this process that knew ``topics`` before they were retired is
    left (their owners renew them, see :meth:`Reader.needs_renewal`): only then may a topic of the
    same name be created. False when some are still open after ``timeout_s``."""
    names = set(topics)
    deadline = time.monotonic() + timeout_s
    while True:
        with _registry.lock:
            readers = list(_registry.readers)
        if not any(names & reader.outdated() for reader in readers):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def readers_of(topic: str) -> int:
    """How many open readers of this process are assigned partitions of ``topic`` (tests, logs)."""
    with _registry.lock:
        readers = list(_registry.readers)
    return sum(1 for reader in readers if topic in reader.topics())
