"""How current the persistent queries writing a table are, for its pull answers. Does I/O.

A table written by a persistent query (CREATE TABLE ... AS SELECT, INSERT INTO) is only as fresh as
that query: one that Spark is still starting (PENDING), that failed (ERROR), or that is behind its
sources leaves the table's topic, and so every replica of it, behind without any changelog lag to
show it. So a pull answer on such a table says, beside ``servedBy``, each writing query's state and
lag (``writtenBy``), and a query with a lag bound (``acceptable.offset.lag``,
``ksql.query.pull.max.allowed.offset.lag``) is refused with a retriable 50302 naming the query while
it is not RUNNING or its lag is unknown or beyond the bound. The bound is end to end: the query's
lag plus the replica's changelog lag (`changelog_bound` is what is left for the latter).

A query's lag is the records of its source topics beyond what its last committed micro-batch read
(the driver's ``processed``, from Spark's progress) against end offsets read by a fetch (the tables'
`EndProbe`, never ListOffsets). Statuses come from this server's query engine, and in a cluster
from the lag reports of the live server that runs the query (``cluster._lags``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.gateway.errors import KsqlError
from headwater.gateway.services import Services
from headwater.kafka.errors import EndOffsetsUnavailable
from headwater.metastore.catalog import Catalog, Query, Source

#: How long a lookup answered on the event loop may use end offsets read earlier (no I/O there).
RECENT_ENDS_S = 1.0
#: How long a query waits for its writers' source end offsets before their lag is unknown.
ENDS_WAIT_S = 1.0

Ends = Callable[[str, Mapping[int, int]], Mapping[int, int] | None]
"""(topic, {partition: hint}) -> each partition's end offset now, or None when unknown."""


@dataclass(frozen=True, slots=True)
class WrittenBy:
    """A persistent query writing the table, and how current it is.

    Attributes:
        query_id: the query.
        state: RUNNING, PENDING (Spark starting it or it waits for a slot), ERROR, UNKNOWN.
        lag: the records of its sources it has not processed yet (None: unknown).
        message: why it is not RUNNING (the engine's reason), or "".
    """

    query_id: str
    state: str
    lag: int | None
    message: str = ""

    def as_json(self) -> dict[str, Any]:
        """The ``writtenBy`` item."""
        return {"queryId": self.query_id, "state": self.state, "lag": self.lag}

    def describe(self) -> str:
        """One line for an error message."""
        if self.state != "RUNNING":
            return f"query {self.query_id} is {self.state}" + (
                f" ({self.message})" if self.message else ""
            )
        if self.lag is None:
            return f"query {self.query_id} is RUNNING with an unknown lag behind its sources"
        return f"query {self.query_id} is RUNNING, {self.lag} records behind its sources"


class NeedsEnds(Exception):
    """The writers' lag needs end offsets read now, which the event loop must not wait for."""


def query_lag(
    processed: Mapping[str, Mapping[str, int]], sources: Sequence[tuple[str, int]], ends: Ends
) -> int | None:
    """The records in ``sources`` (topic, partitions) beyond ``processed`` (topic ->
    {partition: next offset} its last committed micro-batch read to); None when some source's
    processed offsets or end offsets are unknown."""
    total = 0
    for topic, partitions in sources:
        done = processed.get(topic)
        if done is None or any(str(p) not in done for p in range(partitions)):
            return None
        hints = {p: int(done[str(p)]) for p in range(partitions)}
        now = ends(topic, hints)
        if now is None or any(p not in now for p in hints):
            return None
        total += sum(max(0, int(now[p]) - hints[p]) for p in hints)
    return total


def written_by(
    query: Query, status: Mapping[str, Any] | None, catalog: Catalog, ends: Ends
) -> WrittenBy:
    """A writing query's state and lag, from its status (None: nobody reports it)."""
    if status is None:
        return WrittenBy(query.id, "UNKNOWN", None, "no server reports it running")
    state = str(status.get("state", "UNKNOWN"))
    if state != "RUNNING":
        return WrittenBy(query.id, state, None, str(status.get("message") or ""))
    processed = status.get("processed")
    if not isinstance(processed, Mapping):
        return WrittenBy(query.id, state, None)
    sources = [
        (catalog.sources[n].topic, catalog.sources[n].partitions)
        for n in query.sources
        if n in catalog.sources
    ]
    return WrittenBy(query.id, state, query_lag(processed, sources, ends))


def check_writers(table: str, writers: Sequence[WrittenBy], max_lag: int, bounded: bool) -> None:
    """Refuse (retriable 50302) a bounded query while a writer is not RUNNING, its lag is unknown
    or beyond ``max_lag``."""
    if not bounded:
        return
    bad = [w for w in writers if w.state != "RUNNING" or w.lag is None or w.lag > max_lag]
    if bad:
        raise KsqlError(
            f"table {table} cannot be answered within an offset lag of {max_lag} yet: "
            f"{'; '.join(w.describe() for w in bad)}; retry shortly, or accept more lag with SET "
            "'acceptable.offset.lag'",
            50302,
            kind="generic_error",
            retriable=True,
        )


def changelog_bound(max_lag: int, writers: Sequence[WrittenBy]) -> int:
    """What an end-to-end bound leaves to the changelog once the writers' lag is taken."""
    return max(0, max_lag - sum(w.lag or 0 for w in writers))


def query_statuses(services: Services) -> dict[str, Mapping[str, Any]]:
    """Query id -> status: from this server's engine, else from the newest lag report of a live
    server that runs it (a cluster's controller)."""
    found: dict[str, Mapping[str, Any]] = {}
    agent = services.cluster
    if agent is not None:
        live = agent.live()
        reports = sorted(
            (r.timestamp_ms, host, r) for host, r in agent.lag_reports().items() if host in live
        )
        for _, _, report in reports:
            found.update(report.queries)
    if services.queries is not None:
        found.update(services.queries.statuses())
    return found


def writers_of(
    services: Services, source: Source, *, may_wait: bool, fresh: bool
) -> tuple[WrittenBy, ...]:
    """The queries writing ``source`` and how current each is (empty: none writes it).

    Args:
        services: the server's services.
        source: the table.
        may_wait: whether end offsets may be read now (not on the event loop).
        fresh: lags against end offsets read after this call began (a bounded query's promise is
            about the moment it arrived); else ends read within `RECENT_ENDS_S` do.

    Raises:
        NeedsEnds: ``may_wait`` is False and end offsets must be read.
    """
    catalog = services.runner.catalog
    queries = catalog.writers_of(source.name)
    if not queries:
        return ()
    probe = services.tables.probe if services.tables is not None else None

    def ends(topic: str, hints: Mapping[int, int]) -> Mapping[int, int] | None:
        if probe is None:
            return None
        recent = None if fresh else probe.recent(topic, hints, RECENT_ENDS_S)
        if recent is not None:
            return recent
        if not may_wait:
            raise NeedsEnds
        try:
            return probe.ends(topic, hints, ENDS_WAIT_S)
        except EndOffsetsUnavailable:
            return None

    statuses = query_statuses(services)
    return tuple(
        written_by(q, statuses.get(q.id), catalog, ends)
        for q in sorted(queries, key=lambda q: q.id)
    )
