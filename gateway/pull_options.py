"""The bounds a pull query runs under: server settings, tightened by the table and the request. Pure.

ksqlDB lets a request set ``ksql.query.pull.max.allowed.offset.lag``; KLIP-12 talks of an
``acceptable.offset.lag``, settable per request, per session (the shell's SET sends it with every
request) and per table in its ``WITH`` clause. Every one of them is a bound, so the strictest wins:
nothing can loosen the server's own ``ksql.query.pull.max.allowed.offset.lag``.
``ksql.query.pull.table.scan.enabled``, ``ksql.query.pull.range.scan.enabled`` and
``ksql.query.pull.limit.clause.enabled`` are the server's defaults, which a request may change (as
in ksqlDB). ``ksql.query.pull.timeout.ms`` (a query's time budget) and
``ksql.query.pull.table.scan.max.rows`` (the most rows a scan returns; 0: no bound) are bounds too:
a request may lower them, never raise them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from headwater.gateway.errors import KsqlError
from headwater.gateway.services import PullSettings

LAG_KEYS = ("ksql.query.pull.max.allowed.offset.lag", "acceptable.offset.lag")
SCAN_KEY = "ksql.query.pull.table.scan.enabled"
RANGE_KEY = "ksql.query.pull.range.scan.enabled"
LIMIT_KEY = "ksql.query.pull.limit.clause.enabled"
TIMEOUT_KEY = "ksql.query.pull.timeout.ms"
MAX_ROWS_KEY = "ksql.query.pull.table.scan.max.rows"


@dataclass(frozen=True, slots=True)
class PullOptions:
    """What one pull query may do.

    Attributes:
        max_offset_lag: no partition of the answer may lag its topic by more records than this.
        table_scan_enabled: whether a query without a key condition may scan the table.
        range_scan_enabled: whether a range on a STRING or BYTES key is read as a key range.
        timeout_ms: the query's time budget.
        scan_max_rows: the most rows a scan may return (0: no bound).
        limit_clause_enabled: whether the query may have a LIMIT.
    """

    max_offset_lag: int
    table_scan_enabled: bool
    range_scan_enabled: bool = True
    timeout_ms: int = 60_000
    scan_max_rows: int = 0
    limit_clause_enabled: bool = True


def _lag(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise KsqlError(f"{where}: expected a non-negative integer, got {value!r}", 40000)
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            raise KsqlError(f"{where}: expected a non-negative integer, got {value!r}", 40000)
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise KsqlError(f"{where}: expected a non-negative integer, got {value!r}", 40000)
    return value


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise KsqlError(f"{where}: expected true or false, got {value!r}", 40000)


def pull_options(
    server: PullSettings,
    request_properties: Mapping[str, Any],
    table_properties: Mapping[str, Any] | None = None,
) -> PullOptions:
    """The options of one pull query.

    Args:
        server: the server-wide settings.
        request_properties: the request's ``streamsProperties`` (or ``properties``).
        table_properties: the queried table's ``WITH`` properties (names in any case).

    Raises:
        KsqlError: 40000 for a property value of the wrong kind.
    """
    bound = server.max_allowed_offset_lag
    lowered = {str(k).lower(): v for k, v in request_properties.items()}
    for key in LAG_KEYS:
        if key in lowered:
            bound = min(bound, _lag(lowered[key], key))
    for key, value in (table_properties or {}).items():
        if str(key).lower() in LAG_KEYS:
            bound = min(bound, _lag(value, f"the table's {str(key).upper()}"))
    scan = server.table_scan_enabled
    if SCAN_KEY in lowered:
        scan = _flag(lowered[SCAN_KEY], SCAN_KEY)
    ranges = server.range_scan_enabled
    if RANGE_KEY in lowered:
        ranges = _flag(lowered[RANGE_KEY], RANGE_KEY)
    limits = server.limit_clause_enabled
    if LIMIT_KEY in lowered:
        limits = _flag(lowered[LIMIT_KEY], LIMIT_KEY)
    timeout_ms = server.timeout_ms
    if TIMEOUT_KEY in lowered:
        timeout_ms = min(timeout_ms, _lag(lowered[TIMEOUT_KEY], TIMEOUT_KEY))
    max_rows = server.scan_max_rows
    if MAX_ROWS_KEY in lowered:
        asked = _lag(lowered[MAX_ROWS_KEY], MAX_ROWS_KEY)
        max_rows = asked if max_rows == 0 else min(max_rows, asked) if asked else max_rows
    return PullOptions(bound, scan, ranges, timeout_ms, max_rows, limits)
