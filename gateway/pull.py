"""Running one pull query on this server: resolve, check the bounds, execute, and say how stale. Does I/O.

The query's table must be materialized here and every partition the answer reads must be within the
query's offset-lag bound (``pull_options``): a partition that is still restoring, or lags more,
makes the query fail with a retriable 50302 naming each partition's position and lag, never a
silently stale answer. Queries on streams scan the stream's topic, as ksqlDB does. Every answer
carries, per partition read, this server, its position and its lag.

A table scan (or key range) that this server answers alone is not read up front: its answer's
``stream`` reads, computes and renders rows as the response consumes them, so memory stays bounded
whatever the table's size. Every query runs under its time budget and a scan under its row bound
(``pull_options``); one that exceeds either stops with a clear error (mid-answer, for a stream).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.engine.errors import EngineError
from headwater.engine.pull._keys import KeyLookup
from headwater.engine.pull.query import (
    PullPlan,
    PullResult,
    TableReader,
    execute_pull,
    execute_stream_pull,
    plan_pull,
    stream_pull,
)
from headwater.engine.pull.streams import scan_stream
from headwater.engine.pull.tables import PartitionLag
from headwater.engine.pull.template import BoundPull
from headwater.engine.values import output_converter
from headwater.gateway import routed
from headwater.gateway.errors import KsqlError
from headwater.gateway.locate import (
    keyword_offset,
    line_column,
    located_message,
    offset_in_message,
)
from headwater.gateway.pull_options import PullOptions, pull_options
from headwater.gateway.services import Services
from headwater.gateway.writers import (
    NeedsEnds,
    WrittenBy,
    changelog_bound,
    check_writers,
    writers_of,
)
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext import statements as ast


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """A column of the answer's schema."""

    name: str
    type: str
    key: bool = False


@dataclass(frozen=True, slots=True)
class ServedBy:
    """Who answered one partition, at what position, how far behind."""

    partition: int
    host: str
    position: int
    lag: int | None  # None: unknown (Kafka unreachable), never a stale 0

    def as_json(self) -> dict[str, Any]:
        """The ``servedBy`` item."""
        return {
            "partition": self.partition,
            "host": self.host,
            "position": self.position,
            "lag": self.lag,
        }


@dataclass(frozen=True, slots=True)
class PullAnswer:
    """A pull query's answer: schema, rows (JSON-ready values), and staleness per partition."""

    query_id: str
    columns: tuple[OutputColumn, ...]
    rows: list[list[Any]]
    served_by: tuple[ServedBy, ...]
    final_message: str | None = None  # a stream's scan ends with "Query Completed"/"Limit Reached"
    stream: Iterator[list[Any]] | None = None
    """More rows after ``rows``, computed as they are read (a scan served here alone); reading
    them may raise :class:`KsqlError` (the time budget or the row bound ran out)."""
    written_by: tuple[WrittenBy, ...] = ()
    """The persistent queries writing the table and how current each is (``gateway.writers``)."""

    def schema_text(self) -> str:
        """ksqlDB's header schema: ``\\`ID\\` STRING KEY, \\`V\\` BIGINT``."""
        return ", ".join(f"`{c.name}` {c.type}{' KEY' if c.key else ''}" for c in self.columns)


def _source(services: Services, statement: ast.Select) -> Source:
    name = statement.query.source.name
    source = services.runner.catalog.sources.get(name)
    if source is None:
        raise KsqlError(
            f"{name} does not exist.",
            40001,
            statement_text=statement.text,
            line=statement.line,
            column=statement.column,
        )
    return source


@dataclass(frozen=True, slots=True)
class PreparedPull:
    """A pull query checked and planned, not yet run.

    Attributes:
        text: the statement as parsed (variables substituted, parameters bound): what errors
            show and what is forwarded.
        bound: the cached plan's execution values when the plan came from the plan cache.
    """

    text: str
    source: Source
    plan: PullPlan
    options: PullOptions
    bound: BoundPull | None = None
    upstream_lag: int = 0  # of the bound, taken by the table's writing queries (gateway.writers)

    def execute(self, reader: TableReader, partitions: Collection[int] | None) -> PullResult:
        """Read a table's rows for this plan (with a cached plan's values, when it has them)."""
        if self.bound is not None:
            return self.bound.execute(reader, partitions)
        return execute_pull(self.plan, reader, partitions=partitions)

    def stream(
        self, reader: TableReader, partitions: Collection[int] | None
    ) -> Iterator[list[Any]]:
        """:meth:`execute`'s rows, lazily (for a scan or a key range)."""
        if self.bound is not None:
            return self.bound.stream(reader, partitions)
        return stream_pull(self.plan, reader, partitions)

    @property
    def scan(self) -> bool:
        """Whether it reads more than a few keys: a stream, a table scan or a key range."""
        return self.source.kind is SourceKind.STREAM or not isinstance(self.plan.access, KeyLookup)

    @property
    def point_lookup(self) -> bool:
        """Whether it reads a few keys of a table (cheap enough to run without a thread hop)."""
        access = self.plan.access
        return (
            self.source.kind is SourceKind.TABLE
            and isinstance(access, KeyLookup)
            and len(access.keys) <= _POINT_LOOKUP_KEYS
        )


_POINT_LOOKUP_KEYS = 16
RESTORE_WAIT_S = 2.0
"""How long a query waits for a restoring partition before answering 50302."""
FRESH_END_WAIT_S = 1.0
"""How long a query with a lag bound waits for its partitions' current end offsets before its lag
is unknown (and it is refused)."""
FRESH_CATCH_UP_WAIT_S = 0.2
"""How long a replica more than the bound behind the current end may take to catch up to it before
the query is refused (a fetch or two: well within a forwarded lookup's timeout)."""


def prepare_pull(
    services: Services, statement: ast.Select, properties: Mapping[str, Any]
) -> PreparedPull:
    """Check and plan a pull query against the catalog (no I/O).

    Raises:
        KsqlError: a query ksqlDB would refuse (40001), a bad property (40000).
    """
    query = statement.query
    if query.emit is not None:  # EMIT CHANGES went to the push path: this is EMIT FINAL
        line, column = line_column(statement, keyword_offset(statement, "EMIT"))
        raise KsqlError(
            f"EMIT {query.emit} is only supported in persistent queries (CREATE TABLE ... AS "
            "SELECT ... WINDOW ... EMIT FINAL); drop it to ask a pull query, or use EMIT CHANGES "
            "for a push query",
            40001,
            statement_text=statement.text,
            line=line,
            column=column,
        )
    if query.joins:
        raise KsqlError(
            "Pull queries don't support JOIN clauses. See https://cnfl.io/queries for more info.\n"
            "Add EMIT CHANGES if you intended to issue a push query.",
            40001,
            statement_text=statement.text,
        )
    catalog = services.runner.catalog
    source = _source(services, statement)
    options = pull_options(services.pull, properties, dict(source.properties))
    if query.limit is not None and not options.limit_clause_enabled:  # PullQueryValidator's
        raise KsqlError(
            "LIMIT clause in pull queries is currently disabled. You can enable them by setting "
            "ksql.query.pull.limit.clause.enabled=true. See https://cnfl.io/queries for more "
            "info.\nAdd EMIT CHANGES if you intended to issue a push query.",
            40001,
            statement_text=statement.text,
        )
    try:
        plan = plan_pull(
            statement,
            source,
            catalog.types,
            table_scan_enabled=options.table_scan_enabled,
            range_scan_enabled=options.range_scan_enabled,
        )
    except EngineError as exc:
        offset = offset_in_message(statement, exc.message)
        if offset is None and "WHERE" in exc.message and query.where is not None:
            offset = query.where.meta.get("start") or _first_start(query.where)
        line, column = line_column(statement, offset)
        raise KsqlError(
            located_message(statement, exc.message, offset),
            exc.error_code,
            statement_text=statement.text,
            retriable=exc.retriable,
            line=line,
            column=column,
        ) from exc
    return PreparedPull(statement.text, source, plan, options)


def _first_start(node: Any) -> int | None:
    """The smallest start offset in a tree (where a clause's text begins)."""
    starts = [int(n.meta["start"]) for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else None


class NeedsForwarding(Exception):
    """A query that ``local_only`` execution cannot answer here (some partition is served
    elsewhere, or it would have to wait).

    Attributes:
        plans: when routing sent a partition elsewhere, the hosts to try per partition.
        skip: hosts that failed the query already, with why.
        written_by: the table's writing queries as checked here (the answer's ``writtenBy``).
        properties: the properties to forward with (a bound less the writers' lag), or None.
    """

    def __init__(
        self, plans: dict[int, list[str]] | None = None, skip: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self.plans = plans
        self.skip: dict[str, str] = dict(skip or {})
        self.written_by: tuple[WrittenBy, ...] = ()
        self.properties: Mapping[str, Any] | None = None


def execute_prepared(
    services: Services,
    prepared: PreparedPull,
    properties: Mapping[str, Any] | None = None,
    *,
    local_only: bool = False,
    skip: Mapping[str, str] | None = None,
) -> PullAnswer:
    """Run a prepared pull query: streams by scanning their topic, tables from the replicas the
    cluster routes each partition to (here or forwarded), or from this server alone.

    Args:
        services: the server's services.
        prepared: from :func:`prepare_pull`.
        properties: the request's properties (bounds, read-your-writes token, forwarded partitions).
        local_only: raise :class:`NeedsForwarding` instead of forwarding (the event loop calls
            this for cheap lookups and must never block on another server).
        skip: hosts not to ask (they failed this query already), with why (for the error naming
            them when no other replica is left).

    Raises:
        KsqlError: a bound not met (50302, retriable), or the source changed meanwhile.
    """
    properties = properties or {}
    source, plan = prepared.source, prepared.plan
    columns = _columns(plan.schema)
    query_id = _query_id()
    try:
        if source.kind is SourceKind.STREAM:
            if local_only:
                raise NeedsForwarding
            budget = Budget.of(prepared)
            catalog = services.runner.catalog
            records, ends = scan_stream(services.settings, source, catalog.types)
            result = execute_stream_pull(plan, records)
            served = tuple(
                ServedBy(p, services.advertised, end, 0) for p, end in sorted(ends.items())
            )
            rows = list(budget.apply(_render(plan, result.rows)))
            # ksqlDB ends a stream's pull query by what ended it: its LIMIT, or the stream's end
            final = "Limit Reached" if result.limit_reached else "Query Completed"
            return PullAnswer(query_id, columns, rows, served, final)
        forwarded = routed.forwarded_partitions(properties)
        writers: tuple[WrittenBy, ...] = ()
        if forwarded is None:  # the server asked answers for the writers, not those it forwards to
            prepared, properties, writers = _check_writers(
                services, prepared, properties, local_only
            )
        try:
            answer = _table_answer(
                services, prepared, properties, query_id, columns, local_only, skip or {}, forwarded
            )
        except NeedsForwarding as needs:  # the caller forwards: with the checked writers' bound
            needs.written_by, needs.properties = writers, properties
            raise
        return dataclasses.replace(answer, written_by=writers) if writers else answer
    except EngineError as exc:
        raise KsqlError(
            exc.message, exc.error_code, statement_text=prepared.text, retriable=exc.retriable
        ) from exc


def _check_writers(
    services: Services, prepared: PreparedPull, properties: Mapping[str, Any], local_only: bool
) -> tuple[PreparedPull, Mapping[str, Any], tuple[WrittenBy, ...]]:
    """The table's writing queries (``gateway.writers``), checked against the query's bound; and
    the query and properties with what the bound leaves to the changelog."""
    max_lag = prepared.options.max_offset_lag
    bounded = max_lag < routed.UNBOUNDED
    try:
        writers = writers_of(services, prepared.source, may_wait=not local_only, fresh=bounded)
    except NeedsEnds:
        raise NeedsForwarding from None  # to a worker thread, which may read end offsets
    check_writers(prepared.source.name, writers, max_lag, bounded)
    if not (bounded and writers):
        return prepared, properties, writers
    left = changelog_bound(max_lag, writers)
    options = dataclasses.replace(prepared.options, max_offset_lag=left)
    return (
        dataclasses.replace(prepared, options=options, upstream_lag=max_lag - left),
        {**properties, "acceptable.offset.lag": left},
        writers,
    )


def _table_answer(
    services: Services,
    prepared: PreparedPull,
    properties: Mapping[str, Any],
    query_id: str,
    columns: tuple[OutputColumn, ...],
    local_only: bool,
    skip: Mapping[str, str],
    forwarded: tuple[int, ...] | None,
) -> PullAnswer:
    """A table's answer: from this server alone, or routed across the cluster's replicas."""
    if services.control is not None and services.cluster is not None and forwarded is None:
        return _routed(services, prepared, properties, query_id, columns, local_only, skip)
    tokens = routed.read_after(properties, prepared.source.topic)
    if prepared.scan:  # read as the answer is written
        stream, served = _scan_table(services, prepared, forwarded, tokens, Budget.of(prepared))
        return PullAnswer(query_id, columns, [], served, stream=stream)
    result, served = _pull_table(services, prepared, forwarded, tokens, may_wait=not local_only)
    return PullAnswer(query_id, columns, list(_render(prepared.plan, result.rows)), served)


_QUERY_IDS = itertools.count(int.from_bytes(os.urandom(6), "big") << 16)


def _query_id() -> str:
    """A pull query's id: unique in this process, random across processes (uuid4 reads the OS's
    random source, ~15 us a call here: more than a key lookup)."""
    return f"query_{next(_QUERY_IDS) & 0xFFFFFFFFFFFFFFFF:016x}"


@functools.lru_cache(maxsize=1024)
def _columns(schema: tuple[Any, ...]) -> tuple[OutputColumn, ...]:
    return tuple(OutputColumn(c.name, c.type.sql(), c.key) for c in schema)


@dataclass(frozen=True, slots=True)
class Budget:
    """A query's time budget and row bound, as it runs.

    Attributes:
        deadline: ``time.monotonic()`` after which it stops.
        timeout_ms: the budget (for the message).
        max_rows: the most rows a scan may return (0: no bound).
    """

    deadline: float
    timeout_ms: int
    max_rows: int

    @classmethod
    def of(cls, prepared: PreparedPull) -> Budget:
        """The budget of a query starting now."""
        options = prepared.options
        max_rows = options.scan_max_rows if prepared.scan else 0
        return cls(time.monotonic() + options.timeout_ms / 1000, options.timeout_ms, max_rows)

    def check_time(self) -> None:
        """Raises 40800 once the deadline has passed."""
        if time.monotonic() > self.deadline:
            raise KsqlError(
                f"the pull query ran out of its time budget ({self.timeout_ms} ms); narrow it with "
                "a key condition or a LIMIT, or raise ksql.query.pull.timeout.ms",
                40800,
                kind="generic_error",
            )

    def apply(self, rows: Iterable[list[Any]]) -> Iterator[list[Any]]:
        """``rows``, checked against the deadline (every 256 rows) and the row bound."""
        max_rows = self.max_rows
        for count, row in enumerate(rows, 1):
            if not count & 255:
                self.check_time()
            if count > max_rows > 0:
                raise KsqlError(
                    f"the table scan returns more than {max_rows:,} rows (setting "
                    "ksql.query.pull.table.scan.max.rows); add a key condition or a LIMIT",
                    40000,
                    kind="generic_error",
                )
            yield row
        self.check_time()


def _renderer(plan: PullPlan) -> Callable[[list[Any]], list[Any]] | None:
    """Turns a result row's values into their JSON-able form in place (None: nothing to do)."""
    converters = [
        (i, c)
        for i, column in enumerate(plan.schema)
        if (c := output_converter(column.type)) is not None
    ]
    if not converters:
        return None

    def render(row: list[Any]) -> list[Any]:
        for i, convert in converters:
            row[i] = convert(row[i])
        return row

    return render


def _render(plan: PullPlan, rows: Iterable[list[Any]]) -> Iterator[list[Any]]:
    render = _renderer(plan)
    return iter(rows) if render is None else map(render, rows)


def _routed(
    services: Services,
    prepared: PreparedPull,
    properties: Mapping[str, Any],
    query_id: str,
    columns: tuple[OutputColumn, ...],
    local_only: bool,
    skip: Mapping[str, str],
) -> PullAnswer:
    budget = Budget.of(prepared)
    catalog = services.runner.catalog
    partitions = routed.needed_partitions(prepared, catalog.types)
    try:
        plans = routed.plan_hosts(
            services, prepared, partitions, properties, may_wait=not local_only
        )
    except routed.NeedsWait:
        raise NeedsForwarding from None  # from a worker thread, which may wait
    if skip:
        plans = _without(plans, frozenset(skip))
        if any(not hosts for hosts in plans.values()):
            failed = "; ".join(f"{host}: {why}" for host, why in sorted(skip.items()))
            raise KsqlError(
                f"no replica answered ({failed}), and no other replica is within the bounds",
                50302,
                kind="generic_error",
                retriable=True,
            )
    if local_only and any(hosts[0] != services.advertised for hosts in plans.values()):
        raise NeedsForwarding(plans)
    tokens = routed.read_after(properties, prepared.source.topic)
    if (
        prepared.scan
        and not local_only
        and all(h[0] == services.advertised for h in plans.values())
    ):
        try:  # every partition is read here: the answer streams
            stream, served = _scan_table(services, prepared, tuple(sorted(plans)), tokens, budget)
            return PullAnswer(query_id, columns, [], served, stream=stream)
        except EngineError as exc:
            if not exc.retriable:
                raise
        except KsqlError as exc:
            if not exc.retriable:
                raise
        # a partition moved away a moment ago: as below, with failover to the other replicas

    def run_local(parts: tuple[int, ...]) -> routed.PartialAnswer:
        try:
            result, served = _pull_table(services, prepared, parts, tokens, may_wait=not local_only)
            rows = list(budget.apply(_render(prepared.plan, result.rows)))
        except EngineError as exc:  # e.g. a partition moved away a moment ago: the next replica
            raise KsqlError(
                exc.message, exc.error_code, kind="generic_error", retriable=exc.retriable
            ) from exc
        return routed.PartialAnswer(
            services.advertised,
            parts,
            rows,
            [(s.partition, s.host, s.position, s.lag) for s in served],
        )

    if local_only:
        # here, on the event loop: a failure goes to the other replicas without blocking it
        try:
            return answer_of(prepared, [run_local(tuple(sorted(plans)))], query_id, columns)
        except KsqlError as exc:
            if not exc.retriable:
                raise
            services.forwarding.invalidate()  # the routing inputs may be what was stale
            here = frozenset({services.advertised})
            others = _without(plans, here)
            if any(not hosts for hosts in others.values()):
                raise
            raise NeedsForwarding(others, {services.advertised: exc.message}) from exc

    lookup = isinstance(prepared.plan.access, KeyLookup)
    answers = routed.gather(
        services,
        plans,
        run_local,
        prepared.text,
        properties,
        forward_timeout_s=routed.LOOKUP_FORWARD_TIMEOUT_S if lookup else None,
    )
    return answer_of(prepared, answers, query_id, columns, budget)


def _without(plans: dict[int, list[str]], hosts: frozenset[str]) -> dict[int, list[str]]:
    """Each partition's hosts to try, ``hosts`` left out (they failed this query already)."""
    return {p: [h for h in tried if h not in hosts] for p, tried in plans.items()}


def answer_of(
    prepared: PreparedPull,
    answers: list[routed.PartialAnswer],
    query_id: str | None = None,
    columns: tuple[OutputColumn, ...] | None = None,
    budget: Budget | None = None,
) -> PullAnswer:
    """The answer put together from the hosts' partial answers (checked against ``budget``)."""
    rows = [row for answer in answers for row in answer.rows]
    if prepared.plan.limit is not None:
        rows = rows[: prepared.plan.limit]
    if budget is not None:
        rows = list(budget.apply(rows))
    served = sorted(s for answer in answers for s in answer.served_by)
    return PullAnswer(
        query_id or _query_id(),
        columns or _columns(prepared.plan.schema),
        rows,
        tuple(ServedBy(*s) for s in served),
    )


def run_pull(
    services: Services, statement: ast.Select, properties: Mapping[str, Any]
) -> PullAnswer:
    """Check, plan and run a pull query (see :func:`prepare_pull`, :func:`execute_prepared`)."""
    return execute_prepared(services, prepare_pull(services, statement, properties), properties)


def _pull_table(
    services: Services,
    prepared: PreparedPull,
    partitions: tuple[int, ...] | None,
    read_after: Mapping[int, int],
    *,
    may_wait: bool = True,
) -> tuple[Any, tuple[ServedBy, ...]]:
    """Read this server's replicas (``partitions``, or every partition the query needs)."""
    reader, before = _ready(services, prepared, partitions, read_after, may_wait)
    result = prepared.execute(reader, partitions)
    return result, _served(services, prepared, before, sorted(result.partitions))


def _scan_table(
    services: Services,
    prepared: PreparedPull,
    partitions: tuple[int, ...] | None,
    read_after: Mapping[int, int],
    budget: Budget,
) -> tuple[Iterator[list[Any]], tuple[ServedBy, ...]]:
    """:func:`_pull_table` for a scan or key range, whose rows are read as they are consumed:
    every partition it reads is checked against the lag bound first."""
    reader, before = _ready(services, prepared, partitions, read_after, True)
    touched = list(range(reader.partitions)) if partitions is None else sorted(set(partitions))
    served = _served(services, prepared, before, touched)
    rows = budget.apply(_render(prepared.plan, prepared.stream(reader, partitions)))
    return rows, served


def _served(
    services: Services,
    prepared: PreparedPull,
    before: Mapping[int, PartitionLag],
    touched: list[int],
) -> tuple[ServedBy, ...]:
    """The partitions read, checked against the query's lag bound, as ``servedBy`` items."""
    _check_bound(
        prepared.source.name,
        before,
        touched,
        prepared.options.max_offset_lag,
        prepared.upstream_lag,
    )
    return tuple(
        ServedBy(p, services.advertised, before[p].position, before[p].known_lag) for p in touched
    )


def _ready(
    services: Services,
    prepared: PreparedPull,
    partitions: tuple[int, ...] | None,
    read_after: Mapping[int, int],
    may_wait: bool,
) -> tuple[TableReader, dict[int, PartitionLag]]:
    """The table's reader here, once the partitions have applied the client's writes and caught
    up within the bound (waiting a little); and their lags before the read."""
    source, max_lag = prepared.source, prepared.options.max_offset_lag
    tables = services.tables
    if tables is None:
        raise KsqlError(
            f"this server does not materialize tables; {source.name} cannot be queried here",
            50302,
            kind="generic_error",
            retriable=True,
        )
    reader = tables.reader(source, services.runner.catalog)
    wanted = {p: pos for p, pos in read_after.items() if partitions is None or p in partitions}
    if wanted and not may_wait:
        raise NeedsForwarding
    if wanted and not tables.restorer.wait_for_positions(
        source.name, wanted, routed.READ_AFTER_WAIT_S
    ):
        raise KsqlError(
            f"{source.name} has not applied the written offsets {wanted} here within "
            f"{routed.READ_AFTER_WAIT_S:g} s; retry",
            50302,
            kind="generic_error",
            retriable=True,
        )
    before = tables.lags(source.name, partitions)
    bounded = max_lag < routed.UNBOUNDED
    needed = partitions if partitions is not None else tuple(before)
    if any(p in before and not before[p].servable(max_lag, bounded) for p in needed):
        # Restoring (a table created or assigned a moment ago): wait a little before refusing.
        if not may_wait:
            raise NeedsForwarding
        tables.restorer.wait_until_caught_up(source.name, RESTORE_WAIT_S)
        before = tables.lags(source.name, partitions)
    if bounded:  # a bound is a promise about this moment: against the topic's end now
        if not may_wait:
            raise NeedsForwarding
        before = tables.fresh_lags(
            source.name, partitions, max_lag, FRESH_END_WAIT_S, FRESH_CATCH_UP_WAIT_S
        )
    return reader, dict(before)


def _check_bound(
    table: str,
    lags: Mapping[int, PartitionLag],
    touched: list[int],
    max_lag: int,
    upstream_lag: int = 0,
) -> None:
    bounded = max_lag < 2**63 - 1
    bad = [p for p in touched if p not in lags or not lags[p].servable(max_lag, bounded)]
    if not bad:
        return
    details = "; ".join(
        f"partition {p}: " + (lags[p].describe() if p in lags else "not materialized here")
        for p in bad
    )
    raise KsqlError(
        f"table {table} cannot be answered within an offset lag of {max_lag} yet ({details}"
        + (
            f"; the bound less the {upstream_lag} records its writing queries lag behind their "
            "sources"
            if upstream_lag
            else ""
        )
        + "); "
        "retry shortly, or accept more lag with SET 'acceptable.offset.lag'",
        50302,
        kind="generic_error",
        retriable=True,
    )
