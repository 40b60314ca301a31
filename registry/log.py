"""The registry's topic: a follower that folds it into the state, and the writer. Does I/O (Kafka).

The topic (``_schemas`` unless configured: Confluent's name, so one registry's topic can be read
by the other) has one partition and is compacted. Every server follows it from offset 0 in a
background thread and answers reads from its own fold (``state.RegistryState``).

A write (:meth:`RegistryLog.write`), on any server:

1. reads the topic's end from a fetch (never ListOffsets: docs/embedded-broker.md) and waits until
   its own fold has read that far;
2. decides against that state (``operations``: the record, or Confluent's error);
3. produces the record with the end it decided against in the ``headwater-validated-end`` header,
   and waits for the producer's acknowledgement (``acks=all``: the broker has it);
4. waits until its fold has read the record, and answers if the fold applied it. The fold refuses
   a record decided against an end that another applied record has passed since, so of two servers
   deciding at once the first in the topic wins and the other decides again (a bounded number of
   times). A client is answered only once its record is in the topic and applied: a registration
   acknowledged survives a kill -9 of any server and of a durable broker.

Reads use two consumers as the command runner does (``kafka.lanes``): a long fetch wait while far
behind (a server starting on a topic of thousands of one-record batches), a short one at the end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from headwater.kafka import clients
from headwater.kafka.clients import KafkaSettings, consumer, poll_batch
from headwater.kafka.errors import KafkaEdgeError
from headwater.kafka.lanes import Lane, behind_since, live_wait_after_stall, next_lane
from headwater.kafka.offsets import cached_end_offsets, end_offsets
from headwater.registry import records as rec
from headwater.registry.errors import OperationTimedOut, RegistryError, StoreUnavailable
from headwater.registry.operations import Decision
from headwater.registry.state import RegistryState

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "_schemas"
# A registration waits for its own record to come back through the follower, and other servers
# see it one fetch later: 100 ms keeps both well under a second while an idle follower costs a
# fetch every 100 ms, not every 20 (the command runner's, which DDL latency needs).
_LIVE_WAIT_MS = 100
_CATCH_UP_WAIT_MS = 500
_CATCH_UP_AFTER_RECORDS = 20
_ATTEMPTS = 8


class RegistryLog:
    """The fold of the registry's topic, kept current by a background thread, and its writer."""

    def __init__(self, settings: KafkaSettings, topic: str = DEFAULT_TOPIC) -> None:
        self.topic = topic
        self._settings = settings
        self._state = RegistryState()
        self._changed = threading.Condition()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._failure: str | None = None
        self._live_wait_ms = _LIVE_WAIT_MS

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Creates the topic if it is missing and starts following it.

        Raises:
            KafkaEdgeError: the topic cannot be created or checked.
        """
        admin = clients.admin_client(self._settings, "schema-registry-admin")
        clients.create_topic(admin, self._settings, self.topic, 1, {"cleanup.policy": "compact"})
        self._thread = threading.Thread(target=self._follow, name="schema-registry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._producer is not None:
            clients.close_producer(self._producer, 5.0)
            self._producer = None

    # -- reads -----------------------------------------------------------------------------------

    def read(self, reader: Callable[[RegistryState], Any]) -> Any:
        """``reader``'s answer over the current state (under the fold's lock: keep it short)."""
        with self._changed:
            return reader(self._state)

    def wait_until_current(self, timeout_s: float) -> bool:
        """Waits until the fold has read up to the topic's end as of now."""
        end = self._end(timeout_s)
        return self._wait_for(end, timeout_s)

    # -- writes ----------------------------------------------------------------------------------

    def write(self, decide: Callable[[RegistryState], Decision], timeout_s: float = 15.0) -> Any:
        """Decides against a current state and appends the record (module docstring); returns
        the decision's answer.

        Raises:
            RegistryError: what ``decide`` refuses; StoreUnavailable or OperationTimedOut when
                the topic cannot be written or read in time.
        """
        try:  # what needs no write (a schema the subject has) is answered from the fold at once
            with self._changed:
                early = decide(self._state)
            if early.record is None:
                return early.answer
        except RegistryError:
            pass  # decided again below, against the topic's end

        deadline = time.monotonic() + timeout_s
        with self._write_lock:
            for _ in range(_ATTEMPTS):
                left = deadline - time.monotonic()
                end = self._end(left)
                if not self._wait_for(end, left):
                    raise OperationTimedOut("Register operation timed out")
                with self._changed:
                    decision = decide(self._state)
                if decision.record is None:
                    return decision.answer
                offset = self._append(decision.record, end, deadline - time.monotonic())
                if not self._wait_for(offset + 1, deadline - time.monotonic()):
                    raise OperationTimedOut("Register operation timed out")
                with self._changed:
                    verdict = self._state.verdict(offset)
                if verdict:
                    return decision.answer
                log.info("schema registry: record at %d lost to another writer, again", offset)
            raise StoreUnavailable("the registry's topic kept changing under this write; try again")

    def _append(self, record: rec.Record, validated_end: int, timeout_s: float) -> int:
        key, value = rec.encode(record)
        delivered: list[Any] = []
        producer = self._producer_or_new()
        try:
            producer.produce(
                self.topic,
                key=key,
                value=value,
                partition=0,
                headers=[(rec.VALIDATED_END, str(validated_end).encode())],
                on_delivery=lambda err, msg: delivered.append((err, msg)),
            )
            producer.flush(max(timeout_s, 0.1))
        except (KafkaException, BufferError) as exc:
            raise StoreUnavailable(f"cannot write the registry's topic: {exc}") from None
        if not delivered:
            raise OperationTimedOut("Register operation timed out")
        error, message = delivered[0]
        if error is not None:
            raise StoreUnavailable(f"cannot write the registry's topic: {error.str()}")
        offset: int = message.offset()
        return offset

    def _producer_or_new(self) -> Any:
        if self._producer is None:
            self._producer = clients.producer(self._settings, "schema-registry")
        return self._producer

    def _end(self, timeout_s: float) -> int:
        try:
            ends = end_offsets(
                self._settings, self.topic, [0], timeout_ms=max(int(timeout_s * 1000), 100)
            )
        except KafkaEdgeError as exc:
            raise StoreUnavailable(f"cannot read the registry's topic: {exc}") from None
        return ends[0]

    def _wait_for(self, offset: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._changed:
            while self._state.next_offset < offset:
                if self._failure is not None:
                    raise StoreUnavailable(self._failure)
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True

    # -- the follower ----------------------------------------------------------------------------

    def _reader(self, lane: Lane) -> Consumer:
        return consumer(
            self._settings,
            f"schema-registry-{lane.value}",
            read_committed=False,
            partition_eof=True,
            fetch_wait_max_ms=self._live_wait_ms if lane is Lane.LIVE else _CATCH_UP_WAIT_MS,
        )

    def _unstalled(self, live: Consumer, since: float | None) -> tuple[float | None, Consumer]:
        """Workaround "a short fetch wait finds nothing at the end of a long log" (as the command
        runner's, ``kafka.lanes``): a live consumer whose fetches report an end beyond its position
        for a while with no record gets a longer wait. Returns (behind since, the consumer)."""
        now = time.monotonic()
        high = cached_end_offsets(live, self.topic, [0]).get(0)
        (position,) = live.position([TopicPartition(self.topic, 0)])
        at = position.offset if position.offset >= 0 else self._state.next_offset
        since = behind_since(since, at, high, now)
        longer = live_wait_after_stall(
            self._live_wait_ms,
            at,
            high,
            0.0 if since is None else now - since,
            0.5,
            _CATCH_UP_WAIT_MS,
        )
        if longer is None:
            return since, live
        log.info(
            "schema registry topic %s: live fetch wait %d -> %d ms",
            self.topic,
            self._live_wait_ms,
            longer,
        )
        live.close()
        self._live_wait_ms = longer
        renewed = self._reader(Lane.LIVE)
        renewed.assign([TopicPartition(self.topic, 0, at)])
        return None, renewed

    def _follow(self) -> None:
        readers: dict[Lane, Consumer] = {}
        try:
            lane = Lane.CATCH_UP
            reader = readers[lane] = self._reader(lane)
            reader.assign([TopicPartition(self.topic, 0, 0)])
            high: int | None = None
            since: float | None = None  # the end beyond the position, no record (kafka.lanes)
            while not self._stop.is_set():
                messages = poll_batch(reader, 500, 0.1)
                if messages:
                    since = None
                elif lane is Lane.LIVE:
                    since, reader = self._unstalled(reader, since)
                    readers[lane] = reader
                at_end = False
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            at_end = True
                        else:
                            log.warning("schema registry topic %s: %s", self.topic, error.str())
                        continue
                    self._feed(message)
                if not messages:
                    continue
                (position,) = reader.position([TopicPartition(self.topic, 0)])
                with self._changed:
                    if position.offset >= 0:
                        self._state.skip_to(position.offset)
                    self._changed.notify_all()
                high = cached_end_offsets(reader, self.topic, [0]).get(0, high)
                position_now = self._state.next_offset
                wanted = next_lane(lane, position_now, high, at_end, _CATCH_UP_AFTER_RECORDS)
                if wanted is not lane:
                    reader.unassign()
                    lane = wanted
                    if lane not in readers:
                        readers[lane] = self._reader(lane)
                    reader = readers[lane]
                    reader.assign([TopicPartition(self.topic, 0, position_now)])
        except Exception as exc:  # the thread must not die silently
            log.exception("schema registry follower stopped")
            with self._changed:
                self._failure = f"the registry stopped reading its topic: {exc!r}"
                self._changed.notify_all()
        finally:
            for reader in readers.values():
                reader.close()

    def _feed(self, message: Any) -> None:
        offset = message.offset()
        headers = dict(message.headers() or [])
        validated = headers.get(rec.VALIDATED_END)
        try:
            end = int(validated) if validated is not None else None
            record = rec.decode(message.key(), message.value(), end)
        except (rec.UnreadableRecord, ValueError) as exc:
            # Not the registry's (Confluent's readers skip such records too): never stop on one.
            log.warning(
                "schema registry topic %s: record at %d skipped: %s", self.topic, offset, exc
            )
            with self._changed:
                self._state.skip_to(offset + 1)
                self._changed.notify_all()
            return
        with self._changed:
            self._state.feed(offset, record)
            self._changed.notify_all()


__all__ = ["DEFAULT_TOPIC", "RegistryError", "RegistryLog"]
