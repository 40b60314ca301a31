"""Which of the queries a server is told to run it starts now, and why the others wait. Pure.

Every query Spark runs here costs the node a Python process of its own (Spark's streaming-source
runner, one per source the query reads: ~120 MB measured, `bench.query_memory`), besides the shared
JVM and Python workers. So the driver starts a query only while (1) fewer persistent queries than
``ksql.query.persistent.active.limit`` run (a catalog can hold more: a lower limit after a restart,
or queries another server of the cluster accepted), and (2) the memory left to the node after it
(what ``/proc/meminfo`` calls MemAvailable, gathered by the caller) stays above a reserve. A query
that waits is PENDING with the reason, and is started as soon as a slot or the memory is there.
Queries also start one after another (3): each start launches a Python process that must connect
back to Spark within 10 s, and 20 launched at once on a busy 2-core node all failed with "Python
worker failed to connect back", then failed again together on every retry.
Push queries with state (transient) are not counted against the limit, but need the memory too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Admission:
    """What a sync decides.

    Attributes:
        start: the query ids to start now, in the order given.
        waiting: query id -> why it is not started yet.
    """

    start: tuple[str, ...]
    waiting: dict[str, str]


def admit(
    candidates: Sequence[str],
    running: Collection[str],
    transient: Collection[str],
    max_queries: int,
    available_mb: int | None,
    query_mb: int,
    reserve_mb: int,
    starting: int = 0,
    max_starting: int = 2**31 - 1,
) -> Admission:
    """Decide which ``candidates`` (queries not running, in the order they should start) start.

    Args:
        candidates: the query ids waiting to start, oldest first.
        running: the ids of the queries running (or starting, or failed and to be retried).
        transient: which ids (of both) are push queries, not counted against ``max_queries``.
        max_queries: the most persistent queries to run at once.
        available_mb: the node's available memory now (None: unknown, not checked).
        query_mb: what one more query is expected to take.
        reserve_mb: the memory to leave to everything else.
        starting: how many queries are still starting (their sources connecting to Spark).
        max_starting: the most queries starting at once.

    Returns:
        The ids to start and the reasons the others wait.
    """
    persistent = sum(1 for q in running if q not in transient)
    left = None if available_mb is None else available_mb - reserve_mb
    start: list[str] = []
    waiting: dict[str, str] = {}
    for query_id in candidates:
        counted = query_id not in transient
        if counted and persistent >= max_queries:
            waiting[query_id] = (
                f"not started: this server already runs {persistent} persistent queries, its "
                f"ksql.query.persistent.active.limit ({max_queries}); it starts when one is "
                "terminated"
            )
            continue
        if left is not None and left < query_mb:
            waiting[query_id] = (
                f"not started: {available_mb} MB of memory available; a query needs about "
                f"{query_mb} MB beyond the {reserve_mb} MB this server leaves free; it starts "
                "when memory is freed (terminate queries, or give the node more memory)"
            )
            continue
        if starting >= max_starting:
            waiting[query_id] = (
                f"not started yet: {starting} other quer{'y is' if starting == 1 else 'ies are'} "
                "starting (queries start one after another: Spark's Python processes that all "
                "start at once fail to connect back)"
            )
            continue
        start.append(query_id)
        starting += 1
        persistent += counted
        if left is not None:
            left -= query_mb
    return Admission(tuple(start), waiting)


def available_mb(meminfo: str) -> int | None:
    """MemAvailable of a ``/proc/meminfo`` text, in MB (None when it does not say)."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) // 1024
    return None


def creation_order(query_id: str) -> tuple[int, str]:
    """A sort key putting persistent queries in the order they were created: their ids end in
    the command's offset in the log (``CSAS_<SINK>_<n>``, ``INSERTQUERY_<n>``); others go last."""
    tail = query_id.rsplit("_", 1)[-1]
    return (int(tail), query_id) if tail.isdigit() else (2**63, query_id)
