"""Who holds which replica of each materialized table partition (KIP-535 + KIP-708). Pure.

Owns the values (``ServerInfo``, ``PartitionId``, ``Replicas``, ``Assignment``) and the decisions
``assign``, ``assign_standbys`` (KIP-708 around fixed actives), ``promote`` (fail-over to the least
lagging live standby) and ``moves`` (copies a change costs). No I/O, clock or randomness: inputs
are sorted first and ties go to the lowest server id, so input order never matters.

The rules, and where each comes from:

1. Every partition has one active and ``min(num.standby.replicas, servers - 1)`` standbys, all on
   distinct servers (KIP-535; Kafka Streams never puts two copies of a task on one client).
2. Actives are balanced: each server gets ``floor(P/S)`` or ``ceil(P/S)`` of ``P`` partitions. A
   live previous active stays unless its server is over quota (the larger quotas go to the servers
   keeping most); an over-quota server first gives away actives a standby can take over. Homeless
   actives go to a live previous standby with room (no copy), else to the least loaded server with
   room. A balanced assignment is returned unchanged (KIP-441 "converge").
3. Standbys follow KIP-708 as Kafka's ``ClientTagAwareStandbyTaskAssignor`` implements it: a
   standby goes to a server sharing no ``(tag, value)`` with the replicas placed so far, over the
   tags of ``rack.aware.assignment.tags`` ("absolute preferred"); a tag stops constraining once as
   many replicas are placed as it has values ("partially preferred"); servers lacking a tag never
   clash on it. Where nobody qualifies, tags are relaxed from the end of the list (KIP-708: tag
   keys come "in an order of precedence"), then the least loaded server is taken (KIP-708's
   "fallback to the least-loaded"); Kafka goes straight to least loaded.
4. Among servers qualifying at the best level, a previous replica wins (stickiness); previous
   standbys spread at least as well as a fresh placement all stay. Else fewest standbys, then
   fewest standbys shared with this active's server (a dead server's actives fail over to many
   servers), then fewest replicas, then lowest id, judged with the partition's later picks.
5. Standbys are then balanced: while two servers' standby counts differ by two or more, a standby
   moves from the fuller to the emptier one if no rack tag then spans fewer values among the
   partition's replicas (spread is never traded for balance).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

CLIENT_TAG_PREFIX = "client.tag."


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A server that can hold replicas.

    Attributes:
        server_id: ``host:port``.
        tags: its ``client.tag.<name>=<value>`` settings, by name (KIP-708 "client.tag.").
    """

    server_id: str
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.server_id:
            raise ValueError("a server id must not be empty")
        object.__setattr__(self, "tags", MappingProxyType(dict(sorted(self.tags.items()))))

    def __hash__(self) -> int:
        return hash((self.server_id, tuple(self.tags.items())))

    @classmethod
    def from_properties(cls, server_id: str, properties: Mapping[str, str]) -> ServerInfo:
        """A server from its settings: every ``client.tag.<name>=<value>`` becomes a tag."""
        n = len(CLIENT_TAG_PREFIX)
        tags = {k[n:]: v for k, v in properties.items() if k.startswith(CLIENT_TAG_PREFIX)}
        return cls(server_id, {k: v for k, v in tags.items() if k})


def parse_rack_tags(value: str | Sequence[str]) -> tuple[str, ...]:
    """``rack.aware.assignment.tags`` as an ordered tuple, without blanks or repeats."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(dict.fromkeys(t.strip() for t in items if t.strip()))


@dataclass(frozen=True, slots=True, order=True)
class PartitionId:
    """One partition of a materialized table; ordered by table, then partition number."""

    table: str
    partition: int

    def __post_init__(self) -> None:
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")


@dataclass(frozen=True, slots=True)
class Replicas:
    """Where one partition lives: its active server and its standby servers, all distinct."""

    active: str
    standbys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "standbys", tuple(self.standbys))
        if len(set(self.servers)) != len(self.servers):
            raise ValueError(f"replicas must be on distinct servers: {self.servers}")

    @property
    def servers(self) -> tuple[str, ...]:
        """The active's server, then the standbys' servers."""
        return (self.active, *self.standbys)


@dataclass(frozen=True, slots=True)
class Assignment(Mapping[PartitionId, Replicas]):
    """A frozen, hashable, ordered mapping from partition to its replicas."""

    entries: tuple[tuple[PartitionId, Replicas], ...] = ()
    _index: Mapping[PartitionId, Replicas] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries = tuple(sorted(self.entries, key=lambda e: e[0]))
        index = dict(entries)
        if len(index) != len(entries):
            raise ValueError("an assignment lists each partition once")
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "_index", MappingProxyType(index))

    @classmethod
    def of(cls, mapping: Mapping[PartitionId, Replicas]) -> Assignment:
        """An assignment from any mapping."""
        return cls(tuple(mapping.items()))

    def __getitem__(self, key: PartitionId) -> Replicas:
        return self._index[key]

    def __iter__(self) -> Iterator[PartitionId]:
        return (p for p, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def active_counts(self) -> dict[str, int]:
        """Actives per server (servers holding none are absent)."""
        return dict(Counter(r.active for _, r in self.entries))

    def standby_counts(self) -> dict[str, int]:
        """Standbys per server (servers holding none are absent)."""
        return dict(Counter(s for _, r in self.entries for s in r.standbys))


def assign(
    partitions: Iterable[PartitionId],
    servers: Iterable[ServerInfo],
    num_standbys: int,
    rack_tags: Sequence[str],
    previous: Assignment | None = None,
) -> Assignment:
    """Places one active and up to ``num_standbys`` standbys of every partition (rules 1-5 above).

    Args:
        partitions: the partitions of every materialized table (repeats are ignored).
        servers: the live servers, with their tags; ids must be unique.
        num_standbys: ``num.standby.replicas``; capped at ``len(servers) - 1``.
        rack_tags: ``rack.aware.assignment.tags``, in order of precedence.
        previous: the current assignment; replicas on servers still present are kept where the
            rules allow, and entries for other partitions are ignored.

    Returns:
        The new assignment; empty when there are no servers or no partitions.

    Raises:
        ValueError: ``num_standbys`` is negative or two servers share an id.
    """
    by_id = _servers_by_id(servers, num_standbys)
    parts = sorted(set(partitions))
    if not by_id or not parts:
        return Assignment()
    actives = _assign_actives(parts, sorted(by_id), previous or Assignment())
    return assign_standbys(actives, by_id.values(), num_standbys, rack_tags, previous)


def assign_standbys(
    actives: Mapping[PartitionId, str],
    servers: Iterable[ServerInfo],
    num_standbys: int,
    rack_tags: Sequence[str],
    previous: Assignment | None = None,
) -> Assignment:
    """Places standbys around fixed actives by KIP-708 (rules 3-5 above).

    Raises:
        ValueError: an active on an unknown server, a negative ``num_standbys``, a repeated id.
    """
    by_id = _servers_by_id(servers, num_standbys)
    if unknown := sorted({s for s in actives.values() if s not in by_id}):
        raise ValueError(f"actives on unknown servers: {unknown}")
    racks = _Racks.of(by_id.values(), rack_tags)
    ids, parts = sorted(by_id), sorted(actives)
    wanted = min(num_standbys, len(ids) - 1)
    standby_count = dict.fromkeys(ids, 0)
    load = Counter(actives.values())
    pairs: Counter[tuple[str, str]] = Counter()  # (active's server, standby's server) -> count

    def cost(active: str, s: str) -> tuple[int, int, int]:
        return standby_count[s], pairs[active, s], load[s]

    def look_ahead(chosen: list[str], first: str, step: int) -> tuple[object, ...]:
        """Rule 4's key for ``first``, judged with the picks it leaves for the later steps."""
        picks = [*chosen, first]
        for _ in range(step + 1, wanted):
            rest = racks.eligible([s for s in ids if s not in picks], picks)
            picks.append(min(rest, key=lambda s: (cost(chosen[0], s), s)))
        return sorted((cost(chosen[0], s) for s in picks[len(chosen) :]), reverse=True), first

    def place(active: str, sticky: list[str]) -> list[str]:
        chosen = [active]
        for step in range(wanted):
            eligible = racks.eligible([s for s in ids if s not in chosen], chosen)
            kept = [s for s in sticky if s in eligible]
            best = kept[0] if kept else min(eligible, key=lambda s: look_ahead(chosen, s, step))
            chosen.append(best)
        return chosen

    placed: dict[PartitionId, list[str]] = {}
    before: dict[PartitionId, list[str]] = {}
    for p in parts:
        old = previous.get(p) if previous is not None else None
        before[p] = [s for s in (old.servers if old else ()) if s in by_id]
        others = (*old.standbys, old.active) if old else ()
        sticky = [s for s in others if s in by_id and s != actives[p]]
        chosen = place(actives[p], sticky)
        if len(sticky) == wanted and racks.no_narrower([actives[p], *sticky], chosen):
            chosen = [actives[p], *sticky]  # rule 4: well spread previous standbys all stay
        for s in chosen[1:]:
            standby_count[s] += 1
            load[s] += 1
            pairs[chosen[0], s] += 1
        placed[p] = chosen
    _balance_standbys(parts, placed, before, standby_count, racks)
    return Assignment(tuple((p, Replicas(c[0], tuple(sorted(c[1:])))) for p, c in placed.items()))


def warm_up(
    desired: Assignment,
    previous: Assignment,
    live: Collection[str],
    lag: Mapping[tuple[PartitionId, str], int],
    max_lag: int,
) -> Assignment:
    """Moves an active only to a server that is caught up (KIP-441's warm-up).

    Where ``desired`` gives a partition's active to another server while its current active is
    live (a returning or new server taking its share back), the move waits until that server's
    store lags at most ``max_lag``: meanwhile the current active stays and the newcomer is its
    first standby, restoring. Partitions without standbys move at once (nothing could warm up).
    """
    entries = []
    for p, new in desired.items():
        old = previous.get(p)
        if (
            old is not None
            and old.active in live
            and new.active != old.active
            and new.standbys
            and lag.get((p, new.active), max_lag + 1) > max_lag
        ):
            others = [s for s in new.standbys if s != old.active]
            new = Replicas(old.active, (new.active, *others)[: len(new.standbys)])
        entries.append((p, new))
    return Assignment(tuple(entries))


def promote(
    assignment: Assignment, dead: set[str], lag: Mapping[tuple[PartitionId, str], int]
) -> Assignment:
    """Fails over every partition whose active is dead to its least-lagging live standby.

    Ties go to the lowest server id; a standby with no reported lag ranks last. The promoted standby
    leaves the standby list and the dead active is dropped; all else (other partitions, standbys
    dead or alive, partitions without a live standby) is unchanged. ``assign(previous=...)`` on the
    result then refills the standbys.
    """
    entries = []
    for p, r in assignment.items():
        live = [s for s in r.standbys if s not in dead]
        if r.active in dead and live:
            best = min(live, key=lambda s: (lag.get((p, s), math.inf), s))
            r = Replicas(best, tuple(s for s in r.standbys if s != best))
        entries.append((p, r))
    return Assignment(tuple(entries))


def moves(old: Assignment, new: Assignment) -> int:
    """Replicas placed on a server that held no copy of their partition before.

    Each is a store rebuilt from the changelog. Role swaps (a standby promoted, an active demoted)
    copy nothing and do not count; partitions present in only one of the two are not moves.
    """
    return sum(len(set(r.servers) - set(old[p].servers)) for p, r in new.items() if p in old)


def _servers_by_id(servers: Iterable[ServerInfo], num_standbys: int) -> dict[str, ServerInfo]:
    if num_standbys < 0:
        raise ValueError(f"num.standby.replicas must be >= 0, got {num_standbys}")
    by_id: dict[str, ServerInfo] = {}
    for s in servers:
        if s.server_id in by_id:
            raise ValueError(f"duplicate server id {s.server_id!r}")
        by_id[s.server_id] = s
    return by_id


def _assign_actives(
    parts: list[PartitionId], ids: list[str], previous: Assignment
) -> dict[PartitionId, str]:
    """Rule 2: balanced actives that keep as many live previous actives as balance allows."""
    base, extra = divmod(len(parts), len(ids))
    live = set(ids)
    kept: dict[str, list[PartitionId]] = {s: [] for s in ids}
    homeless: list[PartitionId] = []
    for p in parts:
        old = previous.get(p)
        (kept[old.active] if old is not None and old.active in live else homeless).append(p)
    ranked = sorted(ids, key=lambda s: (-len(kept[s]), s))
    big = set(ranked[:extra])
    quota = {s: base + (1 if s in big and len(kept[s]) > base else 0) for s in ids}
    slots = extra - sum(q > base for q in quota.values())
    under = {s for s in ids if len(kept[s]) < base + (1 if extra else 0)}

    def swappable(p: PartitionId) -> bool:
        return any(s in under for s in previous[p].standbys)

    actives: dict[PartitionId, str] = {}
    count = dict.fromkeys(ids, 0)
    for s in ids:
        mine = sorted(kept[s], key=lambda p: (swappable(p), p))
        for p in mine[: quota[s]]:
            actives[p] = s
            count[s] += 1
        homeless.extend(mine[quota[s] :])

    def room(s: str) -> bool:
        return count[s] < base or (count[s] == base and slots > 0)

    def local(p: PartitionId) -> list[str]:
        return [s for s in (previous[p].standbys if p in previous else ()) if s in live and room(s)]

    # Promotions first (a live standby with room takes over in place), then fresh placements.
    for p in sorted(homeless, key=lambda p: (not local(p), p)):
        pick = min(local(p) or [s for s in ids if room(s)], key=lambda s: (count[s], s))
        slots -= 1 if count[pick] == base else 0
        actives[p] = pick
        count[pick] += 1
    return actives


@dataclass(frozen=True, slots=True)
class _Racks:
    """The rack tags in order of precedence, each server's values of them, and each tag's values."""

    names: tuple[str, ...]
    tags: Mapping[str, Mapping[str, str]]
    values: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, servers: Iterable[ServerInfo], rack_tags: Sequence[str]) -> _Racks:
        names = parse_rack_tags(list(rack_tags))
        tags = {i.server_id: {t: i.tags[t] for t in names if t in i.tags} for i in servers}
        values = {t: frozenset(v[t] for v in tags.values() if t in v) for t in names}
        return cls(names, tags, values)

    def eligible(self, candidates: list[str], chosen: list[str]) -> list[str]:
        """Rule 3: the candidates sharing no constraining (tag, value) with ``chosen``.

        A tag constrains while it has more values than replicas placed (Kafka's
        ``updateClientsOnAlreadyUsedTagEntries`` drops it when ``allTagValues.size() <=
        countOfUsedClients``). If nobody qualifies, the lowest-precedence tag is dropped, and so on.
        """
        constraining = [t for t in self.names if len(self.values[t]) > len(chosen)]
        for level in range(len(constraining), 0, -1):
            used = {
                (t, self.tags[s][t])
                for s in chosen
                for t in constraining[:level]
                if t in self.tags[s]
            }
            ok = [s for s in candidates if used.isdisjoint(self.tags[s].items())]
            if ok:
                return ok
        return candidates

    def no_narrower(self, servers: list[str], than: list[str]) -> bool:
        """Whether every tag spans at least as many values over ``servers`` as over ``than``."""
        return all(self._span(servers, t) >= self._span(than, t) for t in self.names)

    def _span(self, servers: list[str], tag: str) -> int:
        return len({self.tags[s][tag] for s in servers if tag in self.tags[s]})


def _balance_standbys(
    parts: list[PartitionId],
    placed: dict[PartitionId, list[str]],
    before: Mapping[PartitionId, list[str]],
    standby_count: dict[str, int],
    racks: _Racks,
) -> None:
    """Rule 5: move standbys from fuller to emptier servers without narrowing any rack spread.

    Freshly placed standbys move first, and onto servers that held the partition before, so balance
    costs as few copies as possible. Every move lowers the sum of squared counts, so this ends.
    """
    while (move := _next_move(parts, placed, before, standby_count, racks)) is not None:
        src, dst, p = move
        placed[p] = [dst if s == src else s for s in placed[p]]
        standby_count[src] -= 1
        standby_count[dst] += 1


def _next_move(
    parts: list[PartitionId],
    placed: Mapping[PartitionId, list[str]],
    before: Mapping[PartitionId, list[str]],
    standby_count: Mapping[str, int],
    racks: _Racks,
) -> tuple[str, str, PartitionId] | None:
    """The fullest source, emptiest destination and partition of rule 5's next move, if any."""
    for src in sorted(standby_count, key=lambda s: (-standby_count[s], s)):
        for dst in sorted(standby_count, key=lambda s: (standby_count[s], s)):
            if standby_count[src] - standby_count[dst] < 2:
                break
            options = [
                (src in before[p], dst not in before[p], p)
                for p in parts
                if src in placed[p][1:]
                and dst not in placed[p]
                and racks.no_narrower([dst if s == src else s for s in placed[p]], placed[p])
            ]
            if options:
                return src, dst, min(options)[2]
    return None
