"""Controller and leader epochs: the fold every server runs over the internal control topic.

No I/O. One server at a time is the controller; it alone changes assignments, and it publishes
each decision to an internal topic. Every server folds that topic, in offset order, through
:func:`fold`, and so accepts or ignores each record identically: correctness rests on this fold,
not on the broker's fencing (docs/architecture.md, "Controller and epochs").

The rules for a record at offset ``o``, checked in this order:

1. Compare-and-append, exactly as the command log (``metastore/replay.py``): the record is
   accepted only if no other record lies between the end offset its writer validated against and
   ``o``: iff ``validated_offset`` is greater than the offset of the last record folded before it,
   whether that record was accepted or not. A ``validated_offset`` beyond ``o`` itself is refused
   (no writer can have read past its own record).
2. A :class:`ControllerClaim` is accepted iff its epoch is exactly the current controller epoch
   plus one. Two servers racing to claim have both validated against the same end, so the first
   appended wins and the second fails rule 1 (and its epoch is no longer current plus one).
3. An :class:`AssignmentDecision` is accepted iff its controller epoch is the current one (a
   stale controller is fenced the moment a newer claim is folded), and, for every partition it
   names, the leader epoch never goes down and goes strictly up whenever the active changes. A
   decision is all or nothing. Partitions it does not name keep their assignment.

Hence one (partition, leader epoch) never has two different actives, and a server acts as active
only while the latest leader epoch it has folded names it (:func:`is_active`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from headwater.cluster.assignment import PartitionId, Replicas


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """Who holds one partition: its active, its standbys, and the leader epoch of that choice."""

    active: str
    standbys: tuple[str, ...]
    leader_epoch: int

    @property
    def replicas(self) -> Replicas:
        """The holders as ``cluster/assignment.py`` describes them."""
        return Replicas(self.active, self.standbys)


def _frozen(
    mapping: Mapping[PartitionId, PartitionLeader],
) -> Mapping[PartitionId, PartitionLeader]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class ControllerClaim:
    """A server claiming to be the controller from ``controller_epoch`` on.

    Attributes:
        server_id: the claiming server.
        controller_epoch: the epoch it claims (the current one plus one).
        validated_offset: the control topic's end offset when it decided to claim.
    """

    server_id: str
    controller_epoch: int
    validated_offset: int


@dataclass(frozen=True, slots=True)
class AssignmentDecision:
    """A controller's change to some partitions' assignment.

    Attributes:
        controller_epoch: the epoch of the controller that decided it.
        validated_offset: the control topic's end offset it decided against.
        assignment: the new holder of each partition it changes.
        removed: partitions no table has any more (dropped): the state forgets them.
    """

    controller_epoch: int
    validated_offset: int
    assignment: Mapping[PartitionId, PartitionLeader]
    removed: frozenset[PartitionId] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignment", _frozen(self.assignment))
        object.__setattr__(self, "removed", frozenset(self.removed))


ControlRecord = ControllerClaim | AssignmentDecision


@dataclass(frozen=True, slots=True)
class ControlState:
    """The control topic folded so far: identical on every server that folded the same records.

    Attributes:
        controller: the current controller, None before the first claim.
        controller_epoch: the current controller epoch (0 before the first claim).
        last_record_offset: the offset of the last record folded, accepted or not (-1 at start).
        partitions: the holder of each assigned partition.
    """

    controller: str | None = None
    controller_epoch: int = 0
    last_record_offset: int = -1
    partitions: Mapping[PartitionId, PartitionLeader] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _frozen(self.partitions))


def _check_entry(
    state: ControlState, partition: PartitionId, leader: PartitionLeader
) -> str | None:
    """Why ``leader`` cannot replace ``partition``'s holder, or None if it can."""
    name = f"{partition.table}/{partition.partition}"
    if leader.leader_epoch < 0:
        return f"{name}: leader epoch {leader.leader_epoch} is negative"
    if leader.active in leader.standbys or len(set(leader.standbys)) != len(leader.standbys):
        return f"{name}: the active and standbys must be distinct servers"
    previous = state.partitions.get(partition)
    if previous is None:
        return None
    if leader.leader_epoch < previous.leader_epoch:
        return (
            f"{name}: leader epoch {leader.leader_epoch} is below the current "
            f"{previous.leader_epoch}"
        )
    if leader.active != previous.active and leader.leader_epoch == previous.leader_epoch:
        return (
            f"{name}: the active changes from {previous.active} to {leader.active} without a "
            f"new leader epoch (still {previous.leader_epoch})"
        )
    return None


def _refusal(state: ControlState, offset: int, record: ControlRecord) -> str | None:
    """Why the record at ``offset`` is not accepted (rules 1 to 3), or None if it is."""
    if record.validated_offset <= state.last_record_offset:
        return (
            f"conflict: validated at offset {record.validated_offset} but the record at offset "
            f"{state.last_record_offset} was appended in between"
        )
    if record.validated_offset > offset:
        return f"validated at offset {record.validated_offset}, beyond its own offset {offset}"
    if isinstance(record, ControllerClaim):
        if record.controller_epoch == state.controller_epoch + 1:
            return None
        return (
            f"stale claim by {record.server_id}: epoch {record.controller_epoch}, but the next "
            f"controller epoch is {state.controller_epoch + 1}"
        )
    if state.controller is None or record.controller_epoch != state.controller_epoch:
        holder = state.controller or "no controller"
        return (
            f"stale controller: decision from controller epoch {record.controller_epoch}, but the "
            f"current epoch is {state.controller_epoch} ({holder})"
        )
    for partition in sorted(record.assignment):
        problem = _check_entry(state, partition, record.assignment[partition])
        if problem is not None:
            return f"invalid assignment: {problem}"
    return None


def fold(state: ControlState, offset: int, record: ControlRecord) -> tuple[ControlState, bool, str]:
    """Fold the control record at ``offset`` into ``state``.

    Args:
        state: the state after every record before ``offset``.
        offset: the record's offset in the control topic (above every offset folded so far;
            gaps, such as transaction markers, are allowed).
        record: the record.

    Returns:
        The new state, whether the record was accepted, and why (a sentence naming the rule
        when it was not). A record that is not accepted changes nothing but the position.

    Raises:
        ValueError: ``offset`` is not above the last offset folded (the driver re-fed a record).
    """
    if offset <= state.last_record_offset:
        raise ValueError(
            f"control records must be folded in offset order: {offset} after "
            f"{state.last_record_offset}"
        )
    moved = replace(state, last_record_offset=offset)
    refusal = _refusal(state, offset, record)
    if refusal is not None:
        return moved, False, refusal
    if isinstance(record, ControllerClaim):
        claimed = replace(
            moved, controller=record.server_id, controller_epoch=record.controller_epoch
        )
        return claimed, True, f"{record.server_id} is controller at epoch {record.controller_epoch}"
    partitions = {p: leader for p, leader in state.partitions.items() if p not in record.removed}
    partitions.update(record.assignment)
    changed = f"assignment of {len(record.assignment)} partition(s)"
    if record.removed:
        changed += f", {len(record.removed)} removed"
    return replace(moved, partitions=partitions), True, changed


def fold_all(
    records: Iterable[tuple[int, ControlRecord]], state: ControlState | None = None
) -> ControlState:
    """Fold ``(offset, record)`` pairs, in the order given, starting from ``state``.

    Args:
        records: the records with their offsets, in offset order.
        state: where to start (a snapshot); the empty state when None.

    Returns:
        The state after the last record.
    """
    current = state if state is not None else ControlState()
    for offset, record in records:
        current, _, _ = fold(current, offset, record)
    return current


def is_active(state: ControlState, server_id: str, partition: PartitionId) -> int | None:
    """Whether ``server_id`` may act as active for ``partition``, by the latest epoch it folded.

    Args:
        state: this server's folded control state.
        server_id: the server asking (usually itself).
        partition: the partition.

    Returns:
        The leader epoch to act (and tag writes) with, or None: not the active, or unassigned.
    """
    leader = state.partitions.get(partition)
    if leader is None or leader.active != server_id:
        return None
    return leader.leader_epoch


def is_fenced(state: ControlState, partition: PartitionId, leader_epoch: int) -> bool:
    """Whether an action tagged with ``leader_epoch`` comes from a superseded active.

    Args:
        state: this server's folded control state.
        partition: the partition the action concerns.
        leader_epoch: the epoch the action was tagged with.

    Returns:
        True when this server has folded a higher leader epoch for the partition.
    """
    leader = state.partitions.get(partition)
    return leader is not None and leader_epoch < leader.leader_epoch


def is_controller(state: ControlState, server_id: str) -> bool:
    """Whether ``server_id`` is the controller by the latest claim folded."""
    return state.controller == server_id


def elect(state: ControlState, live_servers: Collection[str]) -> str:
    """Who should be controller: the current one if it is alive, else the smallest live id.

    Every server computes the same answer from the same inputs, so usually only one claims;
    when views differ, compare-and-append still lets exactly one claim win.

    Args:
        state: the folded control state.
        live_servers: the servers alive in the caller's view (including itself).

    Returns:
        The server id that should hold (or claim) the controller role.

    Raises:
        ValueError: ``live_servers`` is empty.
    """
    if not live_servers:
        raise ValueError("elect needs at least one live server")
    if state.controller is not None and state.controller in live_servers:
        return state.controller
    return min(live_servers)


def may_claim(
    state: ControlState,
    server_id: str,
    live_servers: Collection[str],
    deposed_ms: float | None,
    now_ms: float,
    backoff_ms: float,
) -> bool:
    """Whether ``server_id`` should claim the controller role now.

    It should when :func:`elect` names it and it is not the controller, unless another server
    deposed it less than ``backoff_ms`` ago: when servers disagree about who is alive (an
    asymmetric network fault), two of them would otherwise depose each other every few hundred
    ms; with the back-off the role changes hands at most once per ``backoff_ms``.

    Args:
        state: the folded control state.
        server_id: the server asking.
        live_servers: the servers alive in its view (including itself).
        deposed_ms: when it last lost the role to another server's claim (None: never).
        now_ms: now, on the same clock as ``deposed_ms``.
        backoff_ms: how long a deposed controller waits before it claims again.
    """
    if state.controller == server_id or elect(state, live_servers) != server_id:
        return False
    return deposed_ms is None or now_ms - deposed_ms >= backoff_ms


def next_claim(state: ControlState, server_id: str, end_offset: int) -> ControllerClaim:
    """The claim ``server_id`` should append, having folded the topic up to ``end_offset``.

    Args:
        state: the folded control state (every record below ``end_offset``).
        server_id: the claiming server.
        end_offset: the control topic's end offset the claim is validated against.

    Returns:
        A claim for the next controller epoch.
    """
    return ControllerClaim(server_id, state.controller_epoch + 1, end_offset)


def next_leader_epoch(state: ControlState, partition: PartitionId, active: str) -> int:
    """The leader epoch a decision must carry to make ``active`` the partition's active.

    Args:
        state: the folded control state.
        partition: the partition.
        active: the server to be active.

    Returns:
        The current epoch if the active stays, one more if it changes, 0 for a new partition.
    """
    leader = state.partitions.get(partition)
    if leader is None:
        return 0
    return leader.leader_epoch if leader.active == active else leader.leader_epoch + 1
