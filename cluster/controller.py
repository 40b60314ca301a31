"""The control plane's driver: follows the control topic on every server, and runs the controller.

Does I/O: a Kafka consumer and a producer, in two daemon threads. The decisions are pure
(``cluster/epochs.py`` for claims, fencing and leader epochs; ``cluster/assignment.py`` for who
holds what; :func:`plan_decision` here for the controller's next decision); this module gathers
their inputs and acts on them.

- The **follower** thread folds the control topic from offset 0 through ``epochs.fold``, exactly
  as every other server does, so all servers that folded the same prefix hold the same
  :class:`ControlState`. A record it cannot read stops it (DEGRADED, with the reason) at that
  record: skipping would let servers disagree.
- The **decider** thread, every ``decide_interval_ms``, works only from a state the follower has
  folded up to the end of the topic. If ``epochs.elect`` names this server and it is not the
  controller, it appends a claim; if it is the controller, it appends an assignment decision for the
  partitions whose replicas should change. Every record carries the end offset it was decided
  against, so the fold accepts it only if nothing was appended in between (compare-and-append):
  correctness never rests on broker fencing. After appending, the decider waits until its own
  follower has folded the record and never assumes it was accepted.

A controller frozen mid-decision (SIGSTOP) that wakes up appends records validated against an
offset that newer records have passed, and with a controller epoch a newer claim has replaced:
every server rejects them identically. ``pause``/``resume`` simulate exactly that in tests.

Partitions of dropped tables cannot be removed: ``epochs`` has no record for removal, so the
controller only stops deciding for them and they keep their last assignment in the state.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from headwater.cluster import epochs
from headwater.cluster.assignment import (
    Assignment,
    PartitionId,
    ServerInfo,
    assign,
    promote,
    warm_up,
)
from headwater.cluster.control_codec import UnreadableControlRecord, decode, encode
from headwater.cluster.epochs import (
    AssignmentDecision,
    ControlRecord,
    ControlState,
    PartitionLeader,
    elect,
    may_claim,
    next_claim,
    next_leader_epoch,
)
from headwater.cluster.members import Member
from headwater.cluster.settings import ClusterSettings, control_topic
from headwater.kafka.clients import (
    KafkaSettings,
    admin_client,
    consumer,
    create_topic,
    poll_batch,
    producer_config,
)

log = logging.getLogger(__name__)

# Workaround "Tansu holds every fetch for fetch.wait.max.ms" (docs/embedded-broker.md), as
# in metastore/runner.py: a short wait makes a decision reach every follower within tens of ms.
_FETCH_WAIT_MS = 20
# The source of truth must outlive any retention default of a real Kafka cluster.
_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
_FLUSH_TIMEOUT_S = 5.0
_FOLD_TIMEOUT_S = 5.0
_HISTORY_LIMIT = 10_000
WARM_UP_MAX_LAG = 10_000
"""An active moves to a server (balancing) only once its standby lags at most this many records
(Kafka Streams' acceptable.recovery.lag): a returning server warms up as a standby first."""
_CLAIM_BACKOFF_WINDOWS = 2
"""A deposed controller waits this many heartbeat windows (4 s by default) before it claims again:
servers that disagree about liveness change controllers at most that often, not every check; the
price, when the deposed server has the smallest id and its successor dies within that time, is a
failover later by at most the same."""
_POLL_S = 0.05

LiveFn = Callable[[], Collection[str]]
MembersFn = Callable[[], Mapping[str, Member]]
PartitionsFn = Callable[[], Collection[PartitionId]]
LagsFn = Callable[[], Mapping[tuple[PartitionId, str], int]]


class PlaneStatus(enum.Enum):
    """The control plane's lifecycle."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    DEGRADED = "DEGRADED"
    STOPPED = "STOPPED"


@dataclass(frozen=True, slots=True)
class FoldedRecord:
    """One control record as this server's follower folded it.

    Attributes:
        offset: its offset in the control topic.
        writer: the server that appended it (the record key).
        record: the claim or decision.
        accepted: whether the fold accepted it.
        reason: the fold's explanation (why it was refused, when it was).
    """

    offset: int
    writer: str
    record: ControlRecord
    accepted: bool
    reason: str


def plan_decision(
    state: ControlState,
    settings: ClusterSettings,
    live: Collection[str],
    members: Mapping[str, Member],
    partitions: Collection[PartitionId],
    lags: Mapping[tuple[PartitionId, str], int],
    validated_offset: int,
) -> AssignmentDecision | None:
    """The controller's next decision, or None when nothing should change. Pure.

    Partitions whose active is not live first fail over to their least lagging live standby
    (``assignment.promote``); then ``assignment.assign`` balances actives and refills standbys
    around that, sticking to the current holders. Only partitions whose replicas change are
    named, each with the leader epoch ``epochs.next_leader_epoch`` gives it; partitions of tables
    that no longer exist (dropped) are removed from the state.

    Args:
        state: the folded control state; ``settings.self_id`` must be its controller.
        settings: this server's id, tags, ``num.standby.replicas`` and rack tags.
        live: the live servers (this server counts as live even if absent).
        members: announced servers, for their tags.
        partitions: every partition of every materialized table.
        lags: ``(partition, server) -> lag`` of the standbys' stores.
        validated_offset: the control topic's end offset ``state`` was folded up to.

    Returns:
        The decision to append, or None.
    """
    me = settings.self_id
    if state.controller != me:
        return None
    wanted = set(partitions)
    live_ids = set(live) | {me}
    current = Assignment.of({p: l.replicas for p, l in state.partitions.items() if p in wanted})
    dead = {s for r in current.values() for s in r.servers} - live_ids
    promoted = promote(current, dead, lags)

    def tags(server: str) -> Mapping[str, str]:
        member = members.get(server)
        if member is not None:
            return member.tags
        return settings.tags if server == me else {}

    servers = [ServerInfo(s, tags(s)) for s in sorted(live_ids)]
    desired = assign(
        wanted, servers, settings.num_standby_replicas, settings.rack_tags, previous=promoted
    )
    desired = warm_up(desired, promoted, live_ids, lags, WARM_UP_MAX_LAG)
    changes: dict[PartitionId, PartitionLeader] = {}
    for p, replicas in desired.items():
        old = state.partitions.get(p)
        if (
            old is not None
            and old.active == replicas.active
            and sorted(old.standbys) == sorted(replicas.standbys)
        ):
            continue
        epoch = next_leader_epoch(state, p, replicas.active)
        changes[p] = PartitionLeader(replicas.active, replicas.standbys, epoch)
    removed = frozenset(p for p in state.partitions if p not in wanted)  # of dropped tables
    if not changes and not removed:
        return None
    return AssignmentDecision(state.controller_epoch, validated_offset, changes, removed)


class ControlPlane:
    """One server's view of the control topic, and its controller when elected.

    Args:
        kafka: how to reach Kafka.
        service_id: the service whose control topic (``control_topic(service_id)``) is followed.
        settings: this server's cluster settings (``self_id`` is its server id).
        live: the servers alive in this server's view (heartbeats).
        members: the announced servers, by id (for their rack tags).
        partitions: the partitions of every materialized table.
        lags: ``(partition, server) -> lag``, to promote the most caught-up standby.
        on_change: called with the new state after each accepted record, on the follower thread,
            holding no lock of this object; it must be quick and should not raise.
        decide_interval_ms: how often the decider looks at its inputs.
        live_ready: whether ``live`` is a settled view yet (``ClusterAgent.view_ready``); until
            it is, this server neither claims nor decides. A server just restarted has heard
            from no peer: its view would name only itself, and it would take the controller role
            and assign every partition to itself, without standbys.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        service_id: str,
        settings: ClusterSettings,
        *,
        live: LiveFn,
        members: MembersFn,
        partitions: PartitionsFn,
        lags: LagsFn,
        on_change: Callable[[ControlState], None] | None = None,
        decide_interval_ms: int = 100,
        live_ready: Callable[[], bool] | None = None,
    ) -> None:
        if decide_interval_ms <= 0:
            raise ValueError("decide_interval_ms must be positive")
        self._kafka = kafka
        self._settings = settings
        self._id = settings.self_id
        self._topic = control_topic(service_id)
        self._live, self._members, self._partitions, self._lags = live, members, partitions, lags
        self._on_change = on_change
        self._live_ready = live_ready
        self._interval_s = decide_interval_ms / 1000
        self._changed = threading.Condition()
        self._state = ControlState()
        self._deposed_ms: float | None = None  # when another server's claim took the role away
        self._position = 0  # every record below this offset is folded
        self._caught_up = False  # the follower reached the end at ``_position``
        self._status = PlaneStatus.STARTING
        self._reason = ""
        self._history: deque[FoldedRecord] = deque(maxlen=_HISTORY_LIMIT)
        self._stop = threading.Event()
        self._running = threading.Event()  # cleared by pause()
        self._running.set()
        self._parked = threading.Event()
        self._holding = threading.Event()
        self._threads: list[threading.Thread] = []
        self._producer: Producer | None = None

    # -- what others read ------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        """The control topic."""
        return self._topic

    def state(self) -> ControlState:
        """The control state folded so far (immutable; safe to keep)."""
        with self._changed:
            return self._state

    def is_controller(self) -> bool:
        """Whether this server is the controller by the latest claim it folded (and it runs)."""
        with self._changed:
            return self._status is PlaneStatus.RUNNING and self._state.controller == self._id

    def status(self) -> PlaneStatus:
        """STARTING, RUNNING, DEGRADED (see ``reason``) or STOPPED."""
        with self._changed:
            return self._status

    def reason(self) -> str:
        """Why the plane is DEGRADED ('' otherwise)."""
        with self._changed:
            return self._reason

    def position(self) -> int:
        """Every control record below this offset has been folded."""
        with self._changed:
            return self._position

    def folded(self) -> tuple[FoldedRecord, ...]:
        """The records folded so far, oldest first (the latest 10,000)."""
        with self._changed:
            return tuple(self._history)

    def wait_caught_up(self, timeout_s: float) -> bool:
        """Block until the follower has folded the control topic to its end (a server must not
        route on the assignment it had before a restart); False on timeout or DEGRADED."""
        return self._wait(lambda: self._caught_up, timeout_s)

    def wait_for(self, predicate: Callable[[ControlState], bool], timeout_s: float) -> bool:
        """Block until ``predicate(state())`` holds; False on timeout, DEGRADED or STOPPED."""
        return self._wait(lambda: predicate(self._state), timeout_s)

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Block until ``done()`` holds (checked under the lock at every change); False once the
        plane is DEGRADED or STOPPED without it, or after ``timeout_s``."""
        ended = (PlaneStatus.DEGRADED, PlaneStatus.STOPPED)
        with self._changed:
            self._changed.wait_for(lambda: done() or self._status in ended, timeout_s)
            return done()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the control topic if missing, then start following it and deciding.

        Raises:
            TopicError: the topic cannot be created.
            RuntimeError: already started.
        """
        if self._threads:
            raise RuntimeError("the control plane was already started")
        create_topic(admin_client(self._kafka), self._kafka, self._topic, 1, _TOPIC_CONFIG)
        config = producer_config(self._kafka, f"control-{self._id}")
        config.setdefault("acks", "all")
        config.setdefault("enable.idempotence", True)
        self._producer = Producer(config)
        self._threads = [
            threading.Thread(target=self._follow, name=f"control-follower-{self._id}", daemon=True),
            threading.Thread(target=self._decide, name=f"control-decider-{self._id}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop deciding and following (joins both threads)."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()  # wakes a decider waiting for its record to be folded
        for thread in self._threads:
            thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(1)
        with self._changed:
            self._status = PlaneStatus.STOPPED
            self._changed.notify_all()

    # -- test hooks ------------------------------------------------------------------------------

    def pause(self, timeout_s: float = 5.0) -> bool:
        """Freeze this server as SIGSTOP would (test hook).

        The follower stops folding; the decider keeps deciding from the frozen state but holds any
        record right before appending it, as a process stopped between deciding and producing.

        Returns:
            Whether the follower parked within ``timeout_s``.
        """
        self._running.clear()
        return self._parked.wait(timeout_s)

    def holding(self) -> bool:
        """Whether the paused decider holds a record it will append on ``resume`` (test hook)."""
        return self._holding.is_set()

    def resume(self) -> None:
        """Undo ``pause`` (SIGCONT): the held record is appended, then folding goes on."""
        self._running.set()

    # -- the follower ----------------------------------------------------------------------------

    def _follow(self) -> None:
        reader: Consumer | None = None
        try:
            reader = consumer(
                self._kafka,
                f"control-{self._id}",
                partition_eof=True,
                fetch_wait_max_ms=_FETCH_WAIT_MS,
            )
            # Offset 0, not OFFSET_BEGINNING: a logical offset costs a ListOffsets round first.
            reader.assign([TopicPartition(self._topic, 0, 0)])
            with self._changed:
                if self._status is PlaneStatus.STARTING:
                    self._status = PlaneStatus.RUNNING
            while not self._stop.is_set():
                if not self._running.is_set():
                    self._parked.set()
                    self._running.wait(_POLL_S)
                    continue
                self._parked.clear()
                for message in poll_batch(reader, 500, 0.1):
                    error = message.error()
                    if error is None:
                        if not self._fold(message):
                            return
                    elif error.code() == KafkaError._PARTITION_EOF:
                        self._reached_end(int(message.offset() or 0))
                    else:
                        log.warning("control topic %s: %s", self._topic, error.str())
        except Exception as exc:  # the thread must not die silently
            log.exception("control follower of %s stopped", self._id)
            self._degrade(f"control follower failed: {exc!r}")
        finally:
            if reader is not None:
                reader.close()

    def _fold(self, message: Message) -> bool:
        offset = int(message.offset() or 0)
        key = message.key()
        writer = key.decode("utf-8", "replace") if isinstance(key, bytes) else ""
        try:
            record = decode(message.value())
        except UnreadableControlRecord as exc:
            self._degrade(f"cannot read control record at offset {offset}: {exc.reason}")
            return False
        with self._changed:
            state, accepted, reason = epochs.fold(self._state, offset, record)
            if self._state.controller == self._id and state.controller != self._id:
                self._deposed_ms = time.monotonic() * 1000
            self._state = state
            self._position = offset + 1
            self._caught_up = False
            self._history.append(FoldedRecord(offset, writer, record, accepted, reason))
        log.log(
            logging.INFO if accepted else logging.DEBUG,
            "%s folded control record %d by %s: %s%s",
            self._id,
            offset,
            writer,
            "" if accepted else "rejected, ",
            reason,
        )
        if accepted and self._on_change is not None:
            try:
                self._on_change(state)
            except Exception:
                log.exception("on_change failed after control record %d", offset)
        with self._changed:
            self._changed.notify_all()
        return True

    def _reached_end(self, end: int) -> None:
        with self._changed:
            self._position = max(self._position, end)
            self._caught_up = True
            self._changed.notify_all()

    def _degrade(self, reason: str) -> None:
        log.error("control plane of %s DEGRADED: %s", self._id, reason)
        with self._changed:
            self._status = PlaneStatus.DEGRADED
            self._reason = reason
            self._caught_up = False
            self._changed.notify_all()

    # -- the decider -----------------------------------------------------------------------------

    def _decide(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                record = self._next_record()
                if record is not None:
                    self._append(record)
            except Exception:  # an input callback failed: try again next round
                log.exception("control decider of %s", self._id)

    def _next_record(self) -> ControlRecord | None:
        """The claim or decision to append now, from a state folded to the end, or None."""
        with self._changed:
            if self._status is not PlaneStatus.RUNNING or not self._caught_up:
                return None  # never decide on a state behind the end: catch up first
            state, end = self._state, self._position
        if self._live_ready is not None and not self._live_ready():
            return None  # who is alive is not known yet: decide nothing on "only me"
        live = set(self._live()) | {self._id}
        if elect(state, live) != self._id:
            return None
        if state.controller != self._id:
            backoff_ms = _CLAIM_BACKOFF_WINDOWS * self._settings.heartbeat.window_ms
            if not may_claim(
                state, self._id, live, self._deposed_ms, time.monotonic() * 1000, backoff_ms
            ):
                return None
            return next_claim(state, self._id, end)
        return plan_decision(
            state, self._settings, live, self._members(), self._partitions(), self._lags(), end
        )

    def _append(self, record: ControlRecord) -> None:
        """Append ``record``, then wait until the follower has folded it (accepted or not)."""
        if not self._running.is_set():  # paused: hold the record, as a stopped process would
            self._holding.set()
            while not self._running.wait(_POLL_S):
                if self._stop.is_set():
                    return
            self._holding.clear()
        assert self._producer is not None
        sent: list[tuple[KafkaError | None, Message]] = []
        value, key = encode(record), self._id.encode()
        self._producer.produce(
            self._topic, value, key, partition=0, on_delivery=lambda e, m: sent.append((e, m))
        )
        self._producer.flush(_FLUSH_TIMEOUT_S)
        if not sent or sent[0][0] is not None:
            # Outcome unknown: the follower folds it if it landed; decide again once caught up.
            log.warning(
                "control record of %s unconfirmed: %s",
                self._id,
                sent[0][0] if sent else "flush timed out",
            )
            return
        offset = int(sent[0][1].offset() or 0)
        with self._changed:
            self._changed.wait_for(
                lambda: (
                    self._position > offset
                    or self._status is not PlaneStatus.RUNNING
                    or self._stop.is_set()
                ),
                _FOLD_TIMEOUT_S,
            )
