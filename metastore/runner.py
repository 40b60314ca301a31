"""The command runner: reads the command topic in order and folds every record into the catalog.

Does I/O (a Kafka consumer in a background thread, snapshot files). It loads the newest catalog
snapshot, replays the tail of the log, and then follows the log, deciding each record with the pure
``replay.Fold``. Waiters (submitters, requests carrying a ``commandSequenceNumber``) block on a
condition until the runner has passed an offset or decided a command id. A record it cannot read
leaves the runner DEGRADED, with the reason, at that record: it never skips it and never crash-loops.

It reads with two consumers (``kafka.lanes``): a short fetch wait while at or near the end, so a new
command is decided within tens of ms, and a long one while far behind (a server replaying the log at
start-up), because on the embedded broker short waits crawl over a log of one-record batches, and
every command is one.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message, TopicPartition

from headwater.kafka.clients import KafkaSettings, consumer, poll_batch
from headwater.kafka.lanes import Lane, behind_since, live_wait_after_stall, next_lane
from headwater.kafka.offsets import cached_end_offsets
from headwater.metastore.catalog import Catalog
from headwater.metastore.errors import UnreadableRecord
from headwater.metastore.records import CommandRecord
from headwater.metastore.replay import Fold, Outcome
from headwater.metastore.snapshots import SnapshotStore

log = logging.getLogger(__name__)

# Workaround "Tansu holds every fetch for fetch.wait.max.ms" (docs/embedded-broker.md): at
# librdkafka's default (500 ms) a new command reaches the runner ~190 ms late at p50
# (bench/ddl_latency.py), and every DDL statement waits for its own command to be decided.
_FETCH_WAIT_MS = 20
# The catch-up consumer's wait (see ``kafka.lanes``), and how far behind the end the runner switches
# to it: a few commands behind is still read live.
_CATCH_UP_FETCH_WAIT_MS = 500
_CATCH_UP_AFTER_RECORDS = 20
# How long the live consumer may see a new end without its record before its wait is lengthened
# (``kafka.lanes.live_wait_after_stall``).
_STALL_S = 0.5

#: Called after each decided command, on the runner's thread, with the new catalog.
Listener = Callable[[CommandRecord, Outcome, Catalog], None]


@dataclass(frozen=True, slots=True)
class ApplyLatency:
    """How long commands took from the command log to this server's catalog: from each record's
    timestamp (when its submitter wrote it) to its decision here, for the commands decided since
    the runner first read the log to its end (a replay at start-up decides old commands: their age
    is no latency). A clock behind the submitter's counts as 0."""

    commands: int = 0
    seconds: float = 0.0  # summed
    last_s: float | None = None


class RunnerState(enum.Enum):
    """The runner's lifecycle."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    DEGRADED = "DEGRADED"
    STOPPED = "STOPPED"


class CommandRunner:
    """Follows one command topic (partition 0) and keeps the folded catalog.

    Args:
        settings: how to reach Kafka.
        topic: the command topic.
        snapshots: where catalog snapshots live; None for none (tests).
        snapshot_every: write a snapshot after this many decided commands.
        listener: told of every decided command, on the runner thread while it holds its lock (before
            waiters wake): it must be quick, must not raise and must not call back into the runner.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        snapshots: SnapshotStore | None = None,
        *,
        snapshot_every: int = 500,
        listener: Listener | None = None,
    ) -> None:
        self._settings = settings
        self._topic = topic
        self._snapshots = snapshots
        self._snapshot_every = snapshot_every
        self._listener = listener
        self._fold = Fold()
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = RunnerState.STARTING
        self._reason = ""
        self._since_snapshot = 0
        self._read_to_end = False
        self._high: int | None = None
        self._live_wait_ms = _FETCH_WAIT_MS
        self._latency = ApplyLatency()
        self.replayed_from_snapshot = -1

    # -- what others read ------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The current catalog snapshot (immutable; safe to keep)."""
        return self._fold.catalog

    @property
    def position(self) -> int:
        """Every record below this offset has been decided."""
        return self._fold.position.next_offset

    @property
    def state(self) -> RunnerState:
        """RUNNING, DEGRADED (see ``reason``), ..."""
        return self._state

    @property
    def reason(self) -> str:
        """Why the runner is DEGRADED ('' otherwise)."""
        return self._reason

    def outcome(self, command_id: str) -> Outcome | None:
        """The decision taken for ``command_id``, if it has been read."""
        with self._changed:
            return self._fold.outcomes.get(command_id)

    def outcomes(self) -> dict[str, Outcome]:
        """Every decision taken so far (including those loaded with the snapshot), by command id."""
        with self._changed:
            return dict(self._fold.outcomes)

    def wait_for_position(self, offset: int, timeout_s: float) -> bool:
        """Block until every record below ``offset`` is decided; False on timeout or DEGRADED."""
        return self._wait(lambda: self._fold.position.next_offset >= offset, timeout_s)

    def wait_until_read_to_end(self, timeout_s: float) -> bool:
        """Block until the runner has read the command topic to its end (every record decided) at
        least once since it started: the catalog then holds every statement that took effect before
        this server started. False on timeout or DEGRADED."""
        return self._wait(lambda: self._read_to_end, timeout_s)

    def end_seen(self) -> int | None:
        """The command topic's high watermark in the runner's latest fetch (None: none yet); for
        messages only."""
        return self._high

    def apply_latency(self) -> ApplyLatency:
        """Commands decided live, and how long each took to reach here (`ApplyLatency`)."""
        return self._latency

    def wait_for_outcome(self, command_id: str, timeout_s: float) -> Outcome | None:
        """Block until ``command_id`` is decided; None on timeout or DEGRADED."""
        if not self._wait(lambda: command_id in self._fold.outcomes, timeout_s):
            return None
        return self.outcome(command_id)

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Block until ``done()`` holds (checked under the lock at every change); False once the
        runner is DEGRADED or STOPPED without it, or after ``timeout_s``."""
        ended = (RunnerState.DEGRADED, RunnerState.STOPPED)
        with self._changed:
            self._changed.wait_for(lambda: done() or self._state in ended, timeout_s)
            return done()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the newest snapshot and start following the log in a background thread."""
        loaded = self._snapshots.load() if self._snapshots else None
        if loaded is not None:
            self._fold = loaded
            self.replayed_from_snapshot = loaded.position.next_offset
        self._thread = threading.Thread(target=self._run, name="command-runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following the log and write a final snapshot."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._snapshots is not None and self._state is not RunnerState.STARTING:
            self._snapshots.save(self._fold)
        with self._changed:
            self._state = RunnerState.STOPPED
            self._changed.notify_all()

    # -- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        readers: dict[Lane, Consumer] = {}
        try:
            lane = Lane.LIVE
            reader = readers[lane] = self._reader(lane)
            reader.assign([TopicPartition(self._topic, 0, self._fold.position.next_offset)])
            with self._changed:
                self._state = RunnerState.RUNNING
                self._changed.notify_all()
            since: float | None = None  # the end beyond the position, no record (kafka.lanes)
            while not self._stop.is_set():
                messages = poll_batch(reader, 500, 0.1)
                if messages:
                    since = None
                elif lane is Lane.LIVE:
                    since, renewed = self._unstalled(reader, since)
                    if renewed is not None:
                        reader = readers[lane] = renewed
                at_end = False
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            at_end = True
                        else:
                            log.warning("command topic %s: %s", self._topic, error.str())
                        continue
                    offset = message.offset()
                    assert offset is not None  # a record (errors were handled above)
                    if not self._decide(offset, message.value(), _written_ms(message)):
                        return
                if not messages:
                    continue
                # Past transaction markers too: the reader's position, not last offset + 1.
                (position,) = reader.position([TopicPartition(self._topic, 0)])
                with self._changed:
                    if position.offset >= 0:
                        self._fold.skip_to(position.offset)
                    self._read_to_end = self._read_to_end or at_end
                    self._changed.notify_all()
                self._high = cached_end_offsets(reader, self._topic, [0]).get(0, self._high)
                wanted = next_lane(lane, self.position, self._high, at_end, _CATCH_UP_AFTER_RECORDS)
                if wanted is not lane:
                    log.info(
                        "command topic %s: reading from the %s consumer at offset %d (end %s)",
                        self._topic,
                        wanted.value,
                        self.position,
                        self._high,
                    )
                    reader.unassign()
                    lane = wanted
                    if lane not in readers:
                        readers[lane] = self._reader(lane)
                    reader = readers[lane]
                    reader.assign([TopicPartition(self._topic, 0, self.position)])
        except Exception as exc:  # the thread must not die silently
            log.exception("command runner stopped")
            self._degrade(f"command runner failed: {exc!r}")
        finally:
            for reader in readers.values():
                reader.close()

    def _unstalled(
        self, live: Consumer, since: float | None
    ) -> tuple[float | None, Consumer | None]:
        """Whether `live` stalled behind its end (``kafka.lanes``): (since when it has been behind,
        None) while it has not, (None, a live consumer with a longer fetch wait) once it has."""
        now = time.monotonic()
        self._high = cached_end_offsets(live, self._topic, [0]).get(0, self._high)
        (position,) = live.position([TopicPartition(self._topic, 0)])  # past transaction markers
        at = position.offset if position.offset >= 0 else self.position
        since = behind_since(since, at, self._high, now)
        behind_s = 0.0 if since is None else now - since
        longer = live_wait_after_stall(
            self._live_wait_ms, at, self._high, behind_s, _STALL_S, _CATCH_UP_FETCH_WAIT_MS
        )
        if longer is None:
            return since, None
        log.info(
            "command topic %s: the end at %s, no record for %.1f s at offset %d: fetch wait "
            "%d ms -> %d ms",
            self._topic,
            self._high,
            behind_s,
            at,
            self._live_wait_ms,
            longer,
        )
        live.close()
        self._live_wait_ms = longer
        renewed = self._reader(Lane.LIVE)
        renewed.assign([TopicPartition(self._topic, 0, at)])
        return None, renewed

    def _reader(self, lane: Lane) -> Consumer:
        wait_ms = self._live_wait_ms if lane is Lane.LIVE else _CATCH_UP_FETCH_WAIT_MS
        purpose = "command-runner" if lane is Lane.LIVE else f"command-runner-{lane.value}"
        # Every record, committed or not (read_uncommitted): a record is decided by the fold, by its
        # command id and validated offset, never by its transaction.
        # Workaround "a fenced producer's transaction can stay open forever" (docs/embedded-broker.md):
        # a read_committed reader stops before such a record for good, and no later command is decided.
        return consumer(
            self._settings,
            purpose,
            read_committed=False,
            partition_eof=True,
            fetch_wait_max_ms=wait_ms,
        )

    def _decide(self, offset: int, value: bytes | None, written_ms: int | None = None) -> bool:
        try:
            with self._changed:
                outcome = self._fold.feed(offset, value)
                # The listener runs before waiters wake: when a submitter learns that CREATE TABLE
                # took effect, the table is already being materialized.
                if outcome is not None and self._listener is not None and self._fold.last_record:
                    self._listener(self._fold.last_record, outcome, self._fold.catalog)
                self._changed.notify_all()
        except UnreadableRecord as exc:
            self._degrade(f"cannot apply command-log record at offset {offset}: {exc.message}")
            return False
        if outcome is not None:
            if written_ms is not None and self._read_to_end:
                took = max(0.0, time.time() - written_ms / 1000)
                was = self._latency  # one writer (this thread); readers take the whole value
                self._latency = ApplyLatency(was.commands + 1, was.seconds + took, took)
            self._since_snapshot += 1
            if self._snapshots is not None and self._since_snapshot >= self._snapshot_every:
                self._snapshots.save(self._fold)
                self._since_snapshot = 0
        return True

    def _degrade(self, reason: str) -> None:
        log.error("DEGRADED: %s", reason)
        with self._changed:
            self._state = RunnerState.DEGRADED
            self._reason = reason
            self._changed.notify_all()


def _written_ms(message: Message) -> int | None:
    """The record's timestamp (ms), None when it has none."""
    kind, ms = message.timestamp()
    return ms if kind != TIMESTAMP_NOT_AVAILABLE and ms > 0 else None
