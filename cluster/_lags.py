"""Lag reports (``POST /lag``): their body, the book of reports received, and the merge. No I/O.

Every ``lag.report.interval.ms`` each server posts its ``all_local_store_partition_lags()``:
``{"hostInfo": {"host", "port"}, "lagInfo": {table: {partition: {"current", "end", "lag"}}},
"timestamp": <sender's ms>}`` (partition numbers are JSON object keys, hence strings). A receiver
keeps each peer's newest report (by the sender's timestamp, so a report overtaken in flight never
replaces a newer one). A replica's lag is then measured against the highest end offset any server
reported for the partition (docs/architecture.md, "Lag reporting"): :func:`replica_lags`. No clock is
read here; receipt times are passed in.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from headwater.cluster._heartbeats import BadClusterMessage, host_info, sender_of, timestamp_of
from headwater.cluster.routing import ReplicaLag
from headwater.store.lag import LagInfo

TableLags = Mapping[str, Mapping[int, LagInfo]]
"""One server's lags: ``{table: {partition: LagInfo}}``."""


@dataclass(frozen=True, slots=True)
class LagReport:
    """One server's lags as last reported.

    Attributes:
        lags: ``{table: {partition: LagInfo}}``.
        timestamp_ms: when the sender made the report (its clock).
        received_ms: when it arrived (this server's clock; for the local server, when read).
        queries: the persistent queries the sender runs: ``{query id: {"state", "message",
            "processed": {topic: {partition: next offset}}}}`` (the engine's statuses), so that
            every server can tell how current a table written by one of them is.
    """

    lags: TableLags = field(default_factory=lambda: MappingProxyType({}))
    timestamp_ms: int = 0
    received_ms: int = 0
    queries: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        frozen = {table: MappingProxyType(dict(parts)) for table, parts in self.lags.items()}
        object.__setattr__(self, "lags", MappingProxyType(frozen))


def lag_body(
    server_id: str,
    lags: TableLags,
    now_ms: int,
    queries: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``POST /lag`` body reporting ``lags`` (and the ``queries`` the sender runs) at ``now_ms``."""
    body = {
        "hostInfo": host_info(server_id),
        "lagInfo": {
            table: {
                str(partition): {
                    "current": info.current_offset_position,
                    "end": info.end_offset_position,
                    "lag": info.offset_lag,
                    **(
                        {} if info.last_record_ms is None else {"lastRecordMs": info.last_record_ms}
                    ),
                }
                for partition, info in sorted(parts.items())
            }
            for table, parts in sorted(lags.items())
        },
        "timestamp": now_ms,
    }
    if queries:
        body["queries"] = {
            q: {k: status[k] for k in _QUERY_FIELDS if k in status}
            for q, status in sorted(queries.items())
        }
    return body


_QUERY_FIELDS = ("state", "message", "processed")


def _queries(raw: Any) -> dict[str, dict[str, Any]]:
    """The ``queries`` of a lag report, checked (a malformed entry is an unknown status: left out)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise BadClusterMessage('"queries" must be an object')
    found: dict[str, dict[str, Any]] = {}
    for query_id, status in raw.items():
        if not isinstance(status, Mapping) or not isinstance(status.get("state"), str):
            continue
        entry: dict[str, Any] = {
            "state": status["state"],
            "message": str(status.get("message") or ""),
        }
        processed = status.get("processed")
        if isinstance(processed, Mapping) and all(
            isinstance(offsets, Mapping) and all(_integer(o) for o in offsets.values())
            for offsets in processed.values()
        ):
            entry["processed"] = {
                str(t): {str(p): int(o) for p, o in offsets.items()}
                for t, offsets in processed.items()
            }
        found[str(query_id)] = entry
    return found


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _lag_info(table: str, partition: str, raw: Any) -> LagInfo:
    where = f"lagInfo[{table!r}][{partition!r}]"
    if not isinstance(raw, Mapping):
        raise BadClusterMessage(f"{where} must be an object")
    current, end, lag, last = (raw.get(k) for k in ("current", "end", "lag", "lastRecordMs"))
    if not (isinstance(current, int) and isinstance(end, int) and isinstance(lag, int)) or any(
        isinstance(v, bool) for v in (current, end, lag)
    ):
        raise BadClusterMessage(f'{where} needs integer "current", "end" and "lag"')
    if last is not None and not _integer(last):
        raise BadClusterMessage(f'{where}: "lastRecordMs" must be an integer')
    try:
        return LagInfo(current, end, lag, last)
    except ValueError as exc:
        raise BadClusterMessage(f"{where}: {exc}") from None


def parse_lag_body(body: Mapping[str, Any], received_ms: int) -> tuple[str, LagReport]:
    """A lag report's sender and content.

    Args:
        body: the decoded ``POST /lag`` body.
        received_ms: its arrival time (this server's clock).

    Returns:
        The sender's id and its report.

    Raises:
        BadClusterMessage: the body is not a lag report.
    """
    sender, timestamp = sender_of(body), timestamp_of(body)
    raw = body.get("lagInfo")
    if not isinstance(raw, Mapping):
        raise BadClusterMessage('the lag report needs a "lagInfo" object')
    lags: dict[str, dict[int, LagInfo]] = {}
    for table, parts in raw.items():
        if not isinstance(parts, Mapping):
            raise BadClusterMessage(f"lagInfo[{table!r}] must be an object")
        lags[str(table)] = {}
        for partition, info in parts.items():
            if not str(partition).isdigit():
                raise BadClusterMessage(f"lagInfo[{table!r}]: partition {partition!r} is no number")
            lags[str(table)][int(partition)] = _lag_info(str(table), str(partition), info)
    return sender, LagReport(lags, timestamp, received_ms, _queries(body.get("queries")))


def max_end_offset(host_lags: Mapping[str, TableLags], table: str, partition: int) -> int | None:
    """The highest end offset any server reported for a partition (None: nobody reported it)."""
    ends = [
        lags[table][partition].end_offset_position
        for lags in host_lags.values()
        if table in lags and partition in lags[table]
    ]
    return max(ends, default=None)


def replica_lags(
    host_lags: Mapping[str, TableLags], table: str, partition: int
) -> dict[str, ReplicaLag]:
    """Each reporting replica's position against the partition's highest reported end offset.

    Args:
        host_lags: every server's lags (``{host: {table: {partition: LagInfo}}}``).
        table: the table.
        partition: the partition number.

    Returns:
        ``{host: ReplicaLag(position, end_offset, staleness_ms)}`` for every host that reported
        the partition, all with the same ``end_offset``: the maximum any of them saw. A replica's
        staleness is how much older its newest record is than the newest record of a replica at
        that end (0 at the end itself; None when no replica at the end reported its newest
        record, or the replica did not).
    """
    end = max_end_offset(host_lags, table, partition)
    if end is None:
        return {}
    infos = {
        host: lags[table][partition]
        for host, lags in sorted(host_lags.items())
        if table in lags and partition in lags[table]
    }
    newest = max(
        (
            i.last_record_ms
            for i in infos.values()
            if i.current_offset_position >= end and i.last_record_ms is not None
        ),
        default=None,
    )
    found = {}
    for host, info in infos.items():
        staleness = None
        if info.current_offset_position >= end:
            staleness = 0
        elif newest is not None and info.last_record_ms is not None:
            staleness = max(0, newest - info.last_record_ms)
        found[host] = ReplicaLag(info.current_offset_position, end, staleness)
    return found


class LagBook:
    """The newest lag report of each peer. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[str, LagReport] = {}

    def record(self, host: str, report: LagReport) -> bool:
        """Keep ``report`` unless a report of ``host`` with a later timestamp is already kept.

        Returns:
            Whether it was kept.
        """
        with self._lock:
            current = self._reports.get(host)
            if current is not None and current.timestamp_ms > report.timestamp_ms:
                return False
            self._reports[host] = report
            return True

    def reports(self) -> dict[str, LagReport]:
        """The newest report of each peer that sent one."""
        with self._lock:
            return dict(self._reports)
