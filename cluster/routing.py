"""Where a pull query for one partition goes: the replicas to try, in order, or why none can serve.

No I/O, no clock. The gateway gathers the inputs (the partition's replicas from the assignment,
liveness from heartbeats, lags from lag reports, the caller's bounds) and forwards the read to the
hosts of the returned :class:`RoutePlan` in order; when :func:`route` returns :class:`NoReplica`
the gateway fails the read at once with that value's message (a retriable error), never waiting
for a replica to catch up, as a bounded-staleness read does.

The rules (KLIP-12, then beyond it):

1. A replica can serve only if it is alive (this server is always alive to itself) and within
   every bound of the :class:`RoutingBound`:

   - ``acceptable.offset.lag``: its offset lag is at most ``max_offset_lag``. Lag is measured
     against the highest end offset any replica of the partition reported (docs/architecture.md,
     "Lag reporting"), so one replica's old report cannot make it look caught up.
   - ``max.staleness.ms``: its newest applied record is at most that much older than the
     partition's end. A replica with no lag is never stale; a replica whose report was made
     against an older end than the partition's has unknown staleness, which fails the bound
     (failing is safe; guessing is not).
   - read-your-writes: its position (the next offset it will apply) is at least
     ``min_position``; a token saying "I wrote offset w" asks for ``min_position = w + 1``.

   The bound may be set per request, per session (SET) and per table (``WITH``): the strictest
   of each wins (:func:`strictest`). A replica with no lag report passes only when no bound is set.
2. The active goes first when it can serve, even when a standby is as caught up.
3. Then the standbys that can serve, by increasing lag, this server first among equal lags (no
   network hop), then by server id; standbys of unknown lag (no bound set) go last.

:func:`route` returns a plan or a :class:`NoReplica`; it never raises for a routing outcome.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from headwater.cluster.assignment import PartitionId, Replicas


class Role(enum.Enum):
    """A replica's role in its partition."""

    ACTIVE = "ACTIVE"
    STANDBY = "STANDBY"


class ReplicaState(enum.Enum):
    """Whether a replica can serve a read, and if not, the first rule it breaks."""

    SERVABLE = "SERVABLE"
    DOWN = "DOWN"
    LAG_UNKNOWN = "LAG_UNKNOWN"
    BEHIND_TOKEN = "BEHIND_TOKEN"
    TOO_FAR_BEHIND = "TOO_FAR_BEHIND"
    TOO_STALE = "TOO_STALE"


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    """One replica's last lag report for the partition (KIP-535's ``LagInfo``).

    Attributes:
        position: the next offset it will apply: every record below it is applied.
        end_offset: the partition's end offset as that replica saw it.
        staleness_ms: how much older its newest applied record is than the record at
            ``end_offset - 1`` (the newest it knew of); None when unknown.
    """

    position: int
    end_offset: int
    staleness_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RoutingBound:
    """How far behind a replica answering a read may be. None means unbounded.

    Attributes:
        max_offset_lag: ``acceptable.offset.lag``.
        max_staleness_ms: ``max.staleness.ms``.
        min_position: read-your-writes: the written offset plus one, for this partition.

    Raises:
        ValueError: a bound is negative.
    """

    max_offset_lag: int | None = None
    max_staleness_ms: int | None = None
    min_position: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_offset_lag", "max_staleness_ms", "min_position"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")

    @property
    def unbounded(self) -> bool:
        """Whether no bound is set (any live replica may serve)."""
        return self == RoutingBound()

    def describe(self) -> str:
        """The bound in ksqlDB's property names, for error messages."""
        parts = []
        if self.max_offset_lag is not None:
            parts.append(f"acceptable.offset.lag={self.max_offset_lag}")
        if self.max_staleness_ms is not None:
            parts.append(f"max.staleness.ms={self.max_staleness_ms}")
        if self.min_position is not None:
            parts.append(f"read-your-writes position>={self.min_position}")
        return ", ".join(parts) or "no bound"


def strictest(*bounds: RoutingBound) -> RoutingBound:
    """Combine the request's, the session's and the table's bounds: the strictest of each wins.

    Args:
        *bounds: the bounds to combine (none gives the unbounded bound).

    Returns:
        The smallest lag and staleness limits, and the highest required position.
    """
    lags = [b.max_offset_lag for b in bounds if b.max_offset_lag is not None]
    stalenesses = [b.max_staleness_ms for b in bounds if b.max_staleness_ms is not None]
    positions = [b.min_position for b in bounds if b.min_position is not None]
    return RoutingBound(
        max_offset_lag=min(lags, default=None),
        max_staleness_ms=min(stalenesses, default=None),
        min_position=max(positions, default=None),
    )


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the router saw it.

    Attributes:
        host: its server id.
        role: active or standby.
        state: SERVABLE, or the first rule it breaks.
        position: its reported position, None without a lag report.
        lag: its offset lag against the partition's end, None without a lag report.
        staleness_ms: its staleness (0 when it has no lag), None when unknown.
    """

    host: str
    role: Role
    state: ReplicaState
    position: int | None = None
    lag: int | None = None
    staleness_ms: int | None = None

    def describe(self) -> str:
        """One line for an error message, e.g. ``standby b: TOO_FAR_BEHIND (position 5, lag 9)``."""
        facts = []
        if self.position is not None:
            facts.append(f"position {self.position}, lag {self.lag}")
        if self.staleness_ms is not None:
            facts.append(f"staleness {self.staleness_ms} ms")
        detail = f" ({', '.join(facts)})" if facts else ""
        return f"{self.role.value.lower()} {self.host}: {self.state.value}{detail}"


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """The replicas that may serve the read, in the order to try them.

    Attributes:
        partition: the partition read.
        candidates: the servable replicas, best first.
        skipped: the replicas that cannot serve, with why.
    """

    partition: PartitionId
    candidates: tuple[ReplicaView, ...]
    skipped: tuple[ReplicaView, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        """The servers to try, in order."""
        return tuple(view.host for view in self.candidates)


@dataclass(frozen=True, slots=True)
class NoReplica:
    """No replica of the partition can serve the read within its bound. Retriable: replicas come
    back up and catch up.

    Attributes:
        partition: the partition read.
        bound: the bound that was applied.
        replicas: every replica, active first, with its state and lag.
    """

    retriable: ClassVar[bool] = True

    partition: PartitionId
    bound: RoutingBound
    replicas: tuple[ReplicaView, ...]

    def message(self) -> str:
        """The error message: the partition, the bound, and each replica's state and lag."""
        seen = "; ".join(view.describe() for view in self.replicas)
        return (
            f"no replica of {self.partition.table} partition {self.partition.partition} can "
            f"serve this read ({self.bound.describe()}): {seen}. Retry later or relax the bound."
        )


def _view(
    host: str,
    role: Role,
    alive: bool,
    report: ReplicaLag | None,
    end: int,
    bound: RoutingBound,
) -> ReplicaView:
    if report is None:
        if not alive:
            return ReplicaView(host, role, ReplicaState.DOWN)
        unknown = ReplicaState.SERVABLE if bound.unbounded else ReplicaState.LAG_UNKNOWN
        return ReplicaView(host, role, unknown)
    lag = max(0, end - report.position)
    # A report made against an older end says nothing about the records after that end.
    fresh_report = report.end_offset >= end
    staleness = 0 if lag == 0 else report.staleness_ms if fresh_report else None
    state = ReplicaState.SERVABLE
    if not alive:
        state = ReplicaState.DOWN
    elif bound.min_position is not None and report.position < bound.min_position:
        state = ReplicaState.BEHIND_TOKEN
    elif bound.max_offset_lag is not None and lag > bound.max_offset_lag:
        state = ReplicaState.TOO_FAR_BEHIND
    elif bound.max_staleness_ms is not None and (
        staleness is None or staleness > bound.max_staleness_ms
    ):
        state = ReplicaState.TOO_STALE
    return ReplicaView(host, role, state, report.position, lag, staleness)


def route(
    partition: PartitionId,
    replicas: Replicas,
    alive: Mapping[str, bool],
    lags: Mapping[str, ReplicaLag],
    bound: RoutingBound,
    self_id: str,
) -> RoutePlan | NoReplica:
    """Decide which replicas may answer a pull query on ``partition``, and in which order.

    Args:
        partition: the partition read.
        replicas: its active and standbys (distinct: ``Replicas`` checks it).
        alive: liveness per server as this server sees it; a server not listed is down, except
            ``self_id``, which is always alive.
        lags: the latest lag report per server for this partition.
        bound: the strictest of the request's, session's and table's bounds (:func:`strictest`).
        self_id: this server's id (preferred among standbys of equal lag).

    Returns:
        A :class:`RoutePlan` with at least one host, or :class:`NoReplica` naming every replica's
        state and lag.
    """
    servers = (replicas.active, *replicas.standbys)
    end = max((lags[s].end_offset for s in servers if s in lags), default=0)
    views = [
        _view(
            server,
            Role.ACTIVE if server == replicas.active else Role.STANDBY,
            server == self_id or alive.get(server, False),
            lags.get(server),
            end,
            bound,
        )
        for server in servers
    ]
    active, standbys = views[0], views[1:]
    servable = [v for v in standbys if v.state is ReplicaState.SERVABLE]
    servable.sort(key=lambda v: (v.lag is None, v.lag or 0, v.host != self_id, v.host))
    if active.state is ReplicaState.SERVABLE:
        servable.insert(0, active)
    if not servable:
        return NoReplica(partition, bound, tuple(views))
    skipped = tuple(v for v in views if v.state is not ReplicaState.SERVABLE)
    return RoutePlan(partition, tuple(servable), skipped)
