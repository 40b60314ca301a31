"""Failure detection (KLIP-12): which peers are alive, decided from the heartbeats they sent us.

No I/O, no clock. The heartbeat agent (a driver) sends ``POST /heartbeat`` to every peer every
``send_interval_ms``, records the time (on its own clock) at which each peer's heartbeats arrived,
and every ``check_interval_ms`` calls :func:`decide` with those times and ``now_ms``.

The rule is ksqlDB's ``HeartbeatAgent.decideStatus``, plus the received threshold KLIP-12 names:

- Time after a heartbeat is cut into send-interval slots; a slot that ends with no heartbeat is
  *missed*. Between times ``a`` and ``b`` that makes ``(b - a - 1) // send_interval_ms`` missed
  slots (ksqlDB's formula: at exactly one interval nothing is missed yet).
- An alive host goes down once ``missed_threshold`` slots in a row are missed since its last
  heartbeat: when ``now - last > missed_threshold * send_interval_ms``, and no sooner.
- A down host comes back once the newest ``received_threshold`` heartbeats in the window arrived in
  a row (each at most one interval late: at most one missed slot between two) and the newest is
  itself fresh. One stray heartbeat does not flap a host up.
- A host seen for the first time is optimistically alive (as ksqlDB does for discovered hosts):
  its first-seen time stands in for a heartbeat, so it goes down if nothing arrives in time.
- Only heartbeats inside ``[now - window_ms, now]`` count; the window bounds the memory the driver
  keeps, and is checked to be wide enough never to decide before the thresholds do.

Detection time. A host killed just after its heartbeat at ``t`` is down at the first check at or
after ``t + missed_threshold * send_interval_ms + 1``; checks run every ``check_interval_ms``, so
the worst case is ``missed_threshold * send_interval_ms + check_interval_ms`` after ``t``
(:func:`worst_case_detection_ms`). ksqlDB's defaults (send 100, check 200, missed 3) give 500 ms,
which leaves half of the 1 s target for heartbeat delivery and timer lateness, while a heartbeat
late by less than one interval (one missed slot) is still two slots short of a false alarm.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

#: How many missed slots may lie between two heartbeats that still count as "in a row".
JITTER_SLOTS = 1


@dataclass(frozen=True, slots=True)
class HeartbeatSettings:
    """The five KLIP-12 heartbeat settings (``ksql.heartbeat.*`` in ksqlDB).

    Attributes:
        send_interval_ms: how often a server sends a heartbeat to each peer.
        check_interval_ms: how often a server decides its peers' status.
        window_ms: how far back received heartbeats are considered.
        missed_threshold: missed slots in a row after which a host is down (at least 2, so one
            late heartbeat never flips a host).
        received_threshold: heartbeats in a row after which a down host is up again.

    Raises:
        ValueError: a setting is out of range, or the window is too narrow for the thresholds.
    """

    send_interval_ms: int = 100
    check_interval_ms: int = 200
    window_ms: int = 2000
    missed_threshold: int = 3
    received_threshold: int = 2

    def __post_init__(self) -> None:
        if self.send_interval_ms <= 0 or self.check_interval_ms <= 0:
            raise ValueError("heartbeat send and check intervals must be positive")
        if self.missed_threshold < 1 + JITTER_SLOTS:
            raise ValueError(
                f"missed_threshold must be at least {1 + JITTER_SLOTS} so that one late heartbeat "
                f"never marks a host down; got {self.missed_threshold}"
            )
        if self.received_threshold < 1:
            raise ValueError(
                f"received_threshold must be at least 1; got {self.received_threshold}"
            )
        needed = self.send_interval_ms * max(
            self.missed_threshold + 1, (1 + JITTER_SLOTS) * self.received_threshold
        )
        if self.window_ms < needed:
            raise ValueError(
                f"window_ms={self.window_ms} is too narrow for the thresholds: need at least "
                f"{needed} ms so the thresholds, not the window, decide"
            )


DEFAULT_SETTINGS = HeartbeatSettings()


@dataclass(frozen=True, slots=True)
class HostStatus:
    """One peer's status as this server sees it (a row of ``GET /clusterStatus``).

    Attributes:
        alive: whether the peer is considered up.
        last_heartbeat_ms: when its newest heartbeat arrived (this server's clock), None if never.
        since_ms: when ``alive`` last changed, or when the host was first seen.
        missed: missed slots in a row since its newest heartbeat, at the last decision.
    """

    alive: bool
    last_heartbeat_ms: int | None
    since_ms: int
    missed: int = 0


def missed_slots(since_ms: int, now_ms: int, settings: HeartbeatSettings = DEFAULT_SETTINGS) -> int:
    """Count the send-interval slots that ended with no heartbeat between two times.

    Args:
        since_ms: the time of the last heartbeat (or other reference point).
        now_ms: the later time.
        settings: the heartbeat settings.

    Returns:
        ``(now_ms - since_ms - 1) // send_interval_ms``, never below zero.
    """
    return max(0, (now_ms - since_ms - 1) // settings.send_interval_ms)


def worst_case_detection_ms(settings: HeartbeatSettings = DEFAULT_SETTINGS) -> int:
    """The longest a dead host stays alive in :func:`decide`, from its last heartbeat's arrival.

    Heartbeat delivery latency and timer lateness come on top; the 1 s target leaves room for them.

    Args:
        settings: the heartbeat settings.

    Returns:
        ``missed_threshold * send_interval_ms + check_interval_ms``.
    """
    return settings.missed_threshold * settings.send_interval_ms + settings.check_interval_ms


def _run_length(received: Sequence[int], settings: HeartbeatSettings) -> int:
    """How many of the newest heartbeats (sorted, distinct) arrived in a row."""
    if not received:
        return 0
    run = 1
    for earlier, later in zip(reversed(received[:-1]), reversed(received[1:]), strict=True):
        if missed_slots(earlier, later, settings) > JITTER_SLOTS:
            break
        run += 1
    return run


def _decide_one(
    prior: HostStatus | None,
    times: Sequence[int],
    now_ms: int,
    settings: HeartbeatSettings,
) -> HostStatus:
    window_start = now_ms - settings.window_ms
    received = sorted({t for t in times if window_start <= t <= now_ms})
    if prior is None:
        prior = HostStatus(alive=True, last_heartbeat_ms=None, since_ms=now_ms)
    newest = received[-1] if received else None
    known = [t for t in (prior.last_heartbeat_ms, newest) if t is not None]
    last = max(known, default=None)
    reference = last if last is not None else prior.since_ms
    missed = missed_slots(reference, now_ms, settings)
    fresh = missed < settings.missed_threshold
    if prior.alive:
        alive = fresh
    else:
        alive = fresh and _run_length(received, settings) >= settings.received_threshold
    since = prior.since_ms if alive == prior.alive else now_ms
    return HostStatus(alive=alive, last_heartbeat_ms=last, since_ms=since, missed=missed)


def decide(
    previous: Mapping[str, HostStatus],
    heartbeats: Mapping[str, Sequence[int]],
    now_ms: int,
    settings: HeartbeatSettings = DEFAULT_SETTINGS,
    *,
    members: Collection[str] | None = None,
) -> dict[str, HostStatus]:
    """Decide every peer's status at ``now_ms``.

    Args:
        previous: the statuses returned by the previous call (empty at start).
        heartbeats: per peer, the arrival times of its heartbeats (this server's clock, any
            order; times outside ``[now_ms - window_ms, now_ms]`` are ignored, so the driver may
            keep them until they leave the window).
        now_ms: the decision time (this server's clock).
        settings: the heartbeat settings.
        members: when given, exactly these hosts are decided: a member never seen before is new
            (optimistically alive), and a host not listed is removed from the result. When None,
            the hosts are those in ``previous`` and those that sent heartbeats. The local server
            should not be listed: it is alive to itself.

    Returns:
        The new status of each host, keyed and ordered by host id.
    """
    hosts = set(members) if members is not None else set(previous) | set(heartbeats)
    return {
        host: _decide_one(previous.get(host), heartbeats.get(host, ()), now_ms, settings)
        for host in sorted(hosts)
    }


def live_hosts(statuses: Mapping[str, HostStatus]) -> frozenset[str]:
    """The hosts that are alive in a decision.

    Args:
        statuses: a result of :func:`decide`.

    Returns:
        The ids of the alive hosts.
    """
    return frozenset(host for host, status in statuses.items() if status.alive)
