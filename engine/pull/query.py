"""Pull queries: plan a SELECT against one table or stream, then run it over rows. Pure (no I/O).

Owns what ksqlDB checks and answers for a pull query: the clauses it refuses (JOIN, WINDOW,
GROUP BY, PARTITION BY, HAVING; EMIT makes a push query), the projection (``*`` is every column,
key columns first; ``ROWTIME`` when named; ``ROWPARTITION``/``ROWOFFSET`` refused as in ksqlDB), the
output schema of the ``/query`` header (key columns of a table marked ``KEY``), the WHERE filter,
LIMIT, and the key access (`_pull_keys`): exact keys, a key range, or a scan (refused when table
scans are disabled). Storage stays with the caller behind `TableReader`; execution reads through
it (or over a stream's records) and returns the rows and the partitions it touched.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlglot import exp

from headwater.engine._format import format_expression
from headwater.engine.errors import ExpressionError, PullQueryError, record_failure
from headwater.engine.expressions import (
    Evaluator,
    Scope,
    UnresolvedColumn,
    compile_expression,
    expand_stars,
    pseudo_timestamps_in_millis,
    resolve_type,
    select_names,
)
from headwater.engine.functions.aggregates import AGGREGATE_NAMES
from headwater.engine.functions.types import BIGINT, BOOLEAN, INTEGER, NULL
from headwater.engine.pull._keys import (
    KeyAccess,
    KeyExtractor,
    KeyLookup,
    KeyRange,
    TableScan,
)
from headwater.engine.pull.where_rules import WherePlan, plan_where
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext.sqltypes import SqlType
from headwater.sqlparse_ext.statements import Query, Select

__all__ = [
    "KeyAccess",
    "KeyLookup",
    "KeyRange",
    "OutputColumn",
    "PullPlan",
    "PullResult",
    "Row",
    "TableReader",
    "TableScan",
    "execute_pull",
    "execute_stream_pull",
    "plan_pull",
    "row_failed",
    "row_view",
]

log = logging.getLogger(__name__)

WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
"""A windowed table's window bounds: key columns after its own, in pull queries as in ksqlDB."""
PSEUDO_COLUMNS: Mapping[str, SqlType] = {
    "ROWTIME": BIGINT,
    "ROWPARTITION": INTEGER,
    "ROWOFFSET": BIGINT,
}
_REFUSED_PSEUDO = ("ROWPARTITION", "ROWOFFSET")
_PUSH_HINT = (
    "See https://cnfl.io/queries for more info.\n"
    "Add EMIT CHANGES if you intended to issue a push query."
)


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One column of a pull query's result."""

    name: str
    type: SqlType
    key: bool = False

    def sql(self) -> str:
        """As in ksqlDB's ``/query`` header: ``\\`ID\\` STRING KEY``."""
        return f"`{self.name}` {self.type}" + (" KEY" if self.key else "")


@dataclass(frozen=True, slots=True)
class Row:
    """One stored row of a table (or one record of a stream).

    Attributes:
        key: the key columns' values, in key-column order.
        value: the value (and header) columns by name.
        rowtime: the record timestamp, ms since the epoch.
        partition: the topic partition it came from.
        offset: its offset in that partition (of the changelog, for a table).
    """

    key: tuple[Any, ...]
    value: Mapping[str, Any]
    rowtime: int
    partition: int
    offset: int


class TableReader(Protocol):
    """One materialized table's rows, as the caller stores them (partitioned like its topic)."""

    @property
    def partitions(self) -> int:
        """How many partitions the table has."""
        ...

    def partition_of(self, key: tuple[Any, ...]) -> int:
        """The partition a key lives in (the caller serializes it and applies murmur2)."""
        ...

    def get(self, partition: int, key: tuple[Any, ...]) -> Row | None:
        """The row of that key, or None."""
        ...

    def range(
        self,
        partition: int,
        low: tuple[Any, ...] | None,
        high: tuple[Any, ...] | None,
        low_inclusive: bool,
        high_inclusive: bool,
    ) -> Iterator[Row]:
        """The rows between the bounds (see `KeyRange`), in key order."""
        ...

    def scan(self, partition: int) -> Iterator[Row]:
        """Every row of the partition, in key order."""
        ...


@dataclass(frozen=True, slots=True)
class PullPlan:
    """A checked pull query, ready to run any number of times.

    Attributes:
        source: the table or stream queried.
        schema: the result columns.
        access: how a table's rows are found (a stream is always scanned).
        limit: the LIMIT, or None.
        key_names: the source's key columns (the order of `Row.key`).
        direct: when every SELECT item is a stored column and there is no WHERE: each item's
            (key index, or -1 for a value column, and name), read without evaluators.
    """

    source: Source
    schema: tuple[OutputColumn, ...]
    access: KeyAccess
    limit: int | None
    key_names: tuple[str, ...]
    filter: Evaluator | None = field(default=None, repr=False, compare=False)
    projection: tuple[Evaluator, ...] = field(default=(), repr=False, compare=False)
    direct: tuple[tuple[int, str], ...] | None = field(default=None, repr=False, compare=False)

    def schema_text(self) -> str:
        """The header schema: ``\\`ID\\` STRING KEY, \\`V\\` BIGINT``."""
        return ", ".join(c.sql() for c in self.schema)


@dataclass(frozen=True, slots=True)
class PullResult:
    """The answer of a pull query.

    Attributes:
        schema: the result columns.
        rows: the result rows, one list of values per row, in schema order.
        partitions: the partitions read (for the position and lag the caller reports).
        limit_reached: True when LIMIT stopped the query (ksqlDB's "Limit Reached").
    """

    schema: tuple[OutputColumn, ...]
    rows: list[list[Any]]
    partitions: frozenset[int]
    limit_reached: bool


def plan_pull(
    select: Select | Query,
    source: Source,
    custom_types: Mapping[str, Any],
    *,
    table_scan_enabled: bool = True,
    range_scan_enabled: bool = True,
    push: bool = False,
) -> PullPlan:
    """Checks a pull query against its source and plans it.

    Args:
        select: the parsed SELECT (without EMIT: that is a push query).
        source: the table or stream it reads (the caller resolved ``FROM``).
        custom_types: the catalog's custom types (see `expressions.resolve_type`).
        table_scan_enabled: ``ksql.query.pull.table.scan.enabled``: when False a table query must
            be a key lookup or range scan, as ksqlDB's rules (`where_rules`) define them.
        range_scan_enabled: ``ksql.query.pull.range.scan.enabled``: when False a range on a key
            is a table scan.
        push: planning a push query's filter and projection (``ROWPARTITION``/``ROWOFFSET``
            allowed).

    Returns:
        The plan.

    Raises:
        PullQueryError: With ksqlDB's message for anything ksqlDB refuses in a pull query.
    """
    query = select.query if isinstance(select, Select) else select
    parts = _plan_parts(query, source, custom_types, push)
    access: KeyAccess = TableScan()
    if parts.extractor is not None:
        rules = parts.where_plan(table_scan_enabled, range_scan_enabled)
        try:
            parts.extractor.check_operands(rules.key_operands)
            access = parts.extractor.access(parts.where)
        except ExpressionError as error:
            raise _where_error(error, parts.where) from error
    return parts.plan(access)


@dataclass(frozen=True, slots=True)
class PlanParts:
    """A pull query planned but for its key access (which a cached plan derives per execution).

    Attributes:
        where: the WHERE clause as the filter and the key extraction read it.
        extractor: the key extractor of a table (None for a stream: always scanned).
    """

    source: Source
    schema: tuple[OutputColumn, ...]
    projection: tuple[Evaluator, ...]
    row_filter: Evaluator | None
    limit: int | None
    key_names: tuple[str, ...]
    where: exp.Expr | None
    extractor: KeyExtractor | None
    direct: tuple[tuple[int, str], ...] | None = None
    columns: Mapping[str, SqlType] = field(default_factory=dict)

    def where_plan(self, table_scans: bool, range_scans: bool) -> WherePlan:
        """ksqlDB's plan kind for a table's WHERE under these settings.

        Raises:
            PullQueryError: ksqlDB's refusal.
        """
        keys = [(c.name, self.columns[c.name]) for c in self.source.key_columns]
        return plan_where(
            self.where,
            keys,
            self.columns,
            windowed=bool(self.source.windowed),
            table_scans=table_scans,
            range_scans=range_scans,
        )

    def plan(self, access: KeyAccess) -> PullPlan:
        """The plan with this key access."""
        return PullPlan(
            self.source,
            self.schema,
            access,
            self.limit,
            self.key_names,
            self.row_filter,
            self.projection,
            self.direct,
        )


def plan_parts(query: Query, source: Source, custom_types: Mapping[str, Any]) -> PlanParts:
    """Everything :func:`plan_pull` plans but the key access (for a cached plan: see
    ``engine.pull.template``).

    Raises:
        PullQueryError: as :func:`plan_pull`.
    """
    return _plan_parts(query, source, custom_types, False)


def _plan_parts(
    query: Query, source: Source, custom_types: Mapping[str, Any], push: bool
) -> PlanParts:
    _check_clauses(query, source)
    if query.limit is not None and query.limit < 0:
        kind = "Push" if push else "Pull"
        raise PullQueryError(
            f"{kind} queries don't support negative integers in the LIMIT clause. "
            "See https://cnfl.io/queries for more info."
        )
    columns = {c.name: resolve_type(c.type, custom_types) for c in source.key_columns}
    window_bounds = WINDOW_BOUNDS if source.windowed else ()
    columns.update({name: BIGINT for name in window_bounds})  # a windowed table's key
    columns.update(
        {c.name: resolve_type(c.type, custom_types) for c in source.columns if not c.key}
    )
    scope_columns = {**{k: v for k, v in PSEUDO_COLUMNS.items() if k not in columns}, **columns}
    qualifiers = frozenset(n for n in (source.name, query.source.name, query.source.alias) if n)
    scope = Scope(scope_columns, qualifiers, custom_types)
    is_table = source.kind == SourceKind.TABLE
    key_names = tuple(c.name for c in source.key_columns) + window_bounds
    items = _expand(query.select, source, columns, qualifiers)
    schema, projection = _project(
        items, scope, key_names if is_table else (), push, [c.name for c in source.columns]
    )
    where = query.where
    if where is not None:
        try:
            where = pseudo_timestamps_in_millis(where)
        except ExpressionError as error:
            raise PullQueryError(error.message) from error
    row_filter = None if where is None else _compile_where(where, scope, push)
    extractor = (
        KeyExtractor(key_names, [columns[k] for k in key_names], scope) if is_table else None
    )
    direct = None if row_filter is not None else _direct(items, scope, key_names, columns)
    return PlanParts(
        source,
        schema,
        projection,
        row_filter,
        query.limit,
        key_names,
        where,
        extractor,
        direct,
        scope_columns,
    )


def _direct(
    items: list[exp.Expr], scope: Scope, key_names: tuple[str, ...], columns: Mapping[str, SqlType]
) -> tuple[tuple[int, str], ...] | None:
    """Each SELECT item's (key index or -1, column name) when all are stored columns (what
    ``row_view`` would give them, read straight from the row); None otherwise."""
    direct: list[tuple[int, str]] = []
    for item in items:
        if not isinstance(item, exp.Column) or isinstance(item.this, exp.Star):
            return None
        name = scope.resolve(item)[0]
        if name in key_names:
            direct.append((key_names.index(name), name))
        elif name in columns:
            direct.append((-1, name))
        else:  # a pseudo column
            return None
    return tuple(direct)


def _check_clauses(query: Query, source: Source) -> None:
    if query.emit is not None:
        raise PullQueryError(f"EMIT {query.emit} makes a push query, not a pull query.")
    refused = (
        ("JOIN", query.joins),
        ("WINDOW", query.window),
        ("GROUP BY", query.group_by),
        ("PARTITION BY", query.partition_by),
        ("HAVING", query.having),
    )
    for clause, present in refused:
        if present:
            raise PullQueryError(f"Pull queries don't support {clause} clauses. {_PUSH_HINT}")
    aggregates = sorted(
        {
            call.name.upper()
            for item in query.select
            for call in item.find_all(exp.Anonymous)
            if call.name.upper() in AGGREGATE_NAMES
        }
    )
    if aggregates:  # not "Can't find any functions with the name 'COUNT'": it exists, elsewhere
        raise PullQueryError(
            f"Pull queries don't support aggregate functions: "
            f"{', '.join(aggregates)}. Aggregate with CREATE TABLE ... AS SELECT "
            f"... GROUP BY and query that table. {_PUSH_HINT}"
        )


def _expand(
    items: Iterable[exp.Expr],
    source: Source,
    columns: Mapping[str, SqlType],
    qualifiers: frozenset[str],
) -> list[exp.Expr]:
    """The SELECT list with ``*``, ``T.*`` and ``S->*`` replaced by one item per column."""

    def star() -> list[exp.Expr]:
        names = [c.name for c in source.key_columns] + [n for n in WINDOW_BOUNDS if source.windowed]
        names += [c.name for c in source.columns if not c.key]
        return [exp.column(exp.to_identifier(n, quoted=True)) for n in names]

    try:
        return expand_stars(list(items), qualifiers, columns, star)
    except ExpressionError as error:
        raise PullQueryError(error.message) from error


def _project(
    items: list[exp.Expr],
    scope: Scope,
    key_names: tuple[str, ...],
    push: bool = False,
    taken: Sequence[str] = (),
) -> tuple[tuple[OutputColumn, ...], tuple[Evaluator, ...]]:
    names = select_names(items, taken)  # generated names skip the source's (``taken``)
    schema: list[OutputColumn] = []
    projection: list[Evaluator] = []
    for item, name in zip(items, names, strict=True):
        try:
            compiled = compile_expression(item, scope)
        except UnresolvedColumn as error:
            raise PullQueryError(f"SELECT column '{error.column}' cannot be resolved.") from error
        except ExpressionError as error:
            raise PullQueryError(error.message) from error
        if not push:
            _refuse_pseudo(compiled.references, "SELECT")
        if compiled.type == NULL:
            raise PullQueryError(
                "Can't infer a type of null. Please explicitly cast it to a "
                "required type, e.g. CAST(null AS VARCHAR)."
            )
        column = OutputColumn(name, compiled.type, name in key_names)
        if any(c.name == name for c in schema):
            kind = "key" if column.key else "value"
            raise PullQueryError(f"Duplicate {kind} columns found in schema: {column.sql()}")
        schema.append(column)
        projection.append(compiled.evaluate)
    return tuple(schema), tuple(projection)


def _refuse_pseudo(references: Collection[str], clause: str) -> None:
    refused = [f"`{n}`" for n in _REFUSED_PSEUDO if n in references]
    if refused:
        raise PullQueryError(
            f"Pull queries don't support the following columns in {clause} "
            f"clauses: {', '.join(refused)}"
        )


def _where_error(error: ExpressionError, where: exp.Expr | None) -> PullQueryError:
    """ksqlDB's words for a WHERE clause that does not compile: the cause, then the clause."""
    clause = "" if where is None else f"\nStatement: {format_expression(where)}"
    return PullQueryError(f"Error in WHERE expression: {error.message}{clause}")


def _compile_where(where: exp.Expr, scope: Scope, push: bool = False) -> Evaluator:
    try:
        compiled = compile_expression(where, scope)
    except UnresolvedColumn as error:
        raise PullQueryError(f"WHERE column '{error.column}' cannot be resolved.") from error
    except ExpressionError as error:
        raise _where_error(error, where) from error
    if not push:
        _refuse_pseudo(compiled.references, "WHERE")
    if compiled.type not in (BOOLEAN, NULL):
        raise PullQueryError(
            "Type error in WHERE expression: Should evaluate to boolean but is "
            f"{compiled.text} ({compiled.type}) instead."
        )
    return compiled.evaluate


def execute_pull(
    plan: PullPlan, reader: TableReader, *, partitions: Collection[int] | None = None
) -> PullResult:
    """Runs a table's pull query through ``reader``.

    Rows come in key order within a partition, partitions in increasing order (scans and
    ranges), or in the order the keys were written (key lookups).

    Args:
        plan: the plan from `plan_pull` (of a table).
        reader: the table's rows.
        partitions: only read these partitions (the ones this server serves), or all.

    Returns:
        The rows, and the partitions read.
    """
    touched: set[int] = set()
    return _result(plan, _table_rows(plan, reader, partitions, touched), touched)


def stream_pull(
    plan: PullPlan, reader: TableReader, partitions: Collection[int] | None = None
) -> Iterator[list[Any]]:
    """:func:`execute_pull`'s rows, read and computed as they are consumed (a table scan's answer
    streams with bounded memory). A scan or range reads ``partitions`` (or all) in order."""
    return select_rows(plan, _table_rows(plan, reader, partitions, set()))


def _table_rows(
    plan: PullPlan, reader: TableReader, partitions: Collection[int] | None, touched: set[int]
) -> Iterator[Row]:
    wanted = range(reader.partitions) if partitions is None else sorted(set(partitions))
    access = plan.access

    def rows() -> Iterator[Row]:
        if isinstance(access, KeyLookup):
            for key in access.keys:
                partition = reader.partition_of(key)
                if partitions is not None and partition not in partitions:
                    continue
                touched.add(partition)
                row = reader.get(partition, key)
                if row is not None:
                    yield row
            return
        for partition in wanted:
            touched.add(partition)
            if isinstance(access, KeyRange):
                yield from reader.range(
                    partition, access.low, access.high, access.low_inclusive, access.high_inclusive
                )
            else:
                yield from reader.scan(partition)

    return rows()


def execute_stream_pull(plan: PullPlan, records: Iterable[Row]) -> PullResult:
    """Runs a stream's pull query over its records (the caller reads the topic up to its end).

    Returns:
        The rows in the order of ``records``, and the partitions the records came from.
    """
    touched: set[int] = set()

    def rows() -> Iterator[Row]:
        for record in records:
            touched.add(record.partition)
            yield record

    return _result(plan, rows(), touched)


def _result(plan: PullPlan, rows: Iterator[Row], touched: set[int]) -> PullResult:
    """The selected ``rows``, read whole (``touched`` fills as they are read)."""
    result = list(select_rows(plan, rows))
    limited = plan.limit is not None and len(result) >= plan.limit
    return PullResult(plan.schema, result, frozenset(touched), limited)


def row_failed(what: str, source: str, row: Row, exc: Exception) -> None:
    """Logs a row a query skips because evaluating it raised (the processing log's entry)."""
    log.warning(
        "%s on %s skips the row at partition %d, offset %d: %s",
        what,
        source,
        row.partition,
        row.offset,
        record_failure(exc),
    )


def row_view(row: Row, key_names: tuple[str, ...]) -> dict[str, Any]:
    """What a plan's WHERE and projection read of a row: its value columns, key columns (and a
    windowed table's bounds) and pseudo columns."""
    view = dict(row.value)
    view.update(zip(key_names, row.key))
    view["ROWTIME"] = row.rowtime
    view["ROWPARTITION"], view["ROWOFFSET"] = row.partition, row.offset
    return view


def select_rows(plan: PullPlan, rows: Iterator[Row]) -> Iterator[list[Any]]:
    """Filters and projects rows, lazily, until the LIMIT. A row the WHERE or the projection raises
    on (an expression meeting a value it was not made for) is skipped and logged (`row_failed`),
    as ksqlDB's processing log records it: the answer goes on with the next row."""
    limit, keep, projection, keys = plan.limit, plan.filter, plan.projection, plan.key_names
    if limit == 0:
        return
    count = 0
    direct = plan.direct
    for row in rows:
        if direct is not None:  # stored columns only, no WHERE: no view, no evaluators
            key, value = row.key, row.value
            yield [key[i] if i >= 0 else value.get(name) for i, name in direct]
        else:
            try:
                view = row_view(row, keys)
                if keep is not None and keep(view) is not True:
                    continue
                selected = [f(view) for f in projection]
            except Exception as exc:  # noqa: BLE001 - the row's boundary: skipped, never the answer
                row_failed("pull query", plan.source.name, row, exc)
                continue
            yield selected
        count += 1
        if limit is not None and count >= limit:
            return
