"""An aggregation's stage 1 a batch at a time: decode, WHERE, grouping values and the aggregate
calls' arguments as columns. Pure.

`AggregatePipeline.group` defines each record's `GroupedRow` record by record; `ColumnarGrouping`
computes the same rows for a whole batch: the records become columns (`source_columns`), WHERE,
the GROUP BY expressions and the calls' column arguments run as Arrow kernels where those give the
per-record values and per record elsewhere (`engine/columnar/kernels.py`), and a group's key is
the UTF-8 of its column where the sink's key is one KAFKA STRING. What stays per record is making
the rows themselves: a tuple per record, and a `GroupedRow` per record or, where the chunk is
combined before the shuffle (`group_combined`, as `AggregatePipeline.combine` defines it), per group.
A clean chunk of one partition whose calls are all COUNT or integer SUM is combined by Arrow
(`ColumnarGrouping._counted`: counts, sums wrapped as Java wraps them, each group's newest time
and last row), with no tuple per record.

A record the columns cannot hold or a step raised on, a grouping value that is NULL (the
per-record path's error names it), and every record of a batch the vectorized steps fail on run
through `AggregatePipeline.group_ranked` itself, which skips and reports them with its own
messages. So the rows and errors are the per-record path's whatever the records are, in the same
order (tests/engine/test_columnar_group.py holds both equal on random queries and records).

Queries it does not run (`grouping_refusal` says why; they group per record): TABLE sources (a
changelog, row by row), joins, Python functions that are not vectorized, and sources whose records
do not read as columns (`source_columns.columns_refusal`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from headwater.engine.columnar.batch import Column
from headwater.engine.columnar.kernels import vectorize
from headwater.engine.functions.types import BIGINT, INTEGER, STRING, wrap_int
from headwater.engine.persistent.aggregate_plan import CompiledAggregate
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    TableChange,
    batch_ranks,
    halves,
)
from headwater.engine.persistent.columnar_run import calls_unvectorized
from headwater.engine.persistent.columnar_update import updates_line
from headwater.engine.persistent.query_run import InputRecord, ProcessingError
from headwater.engine.persistent.source_columns import (
    SourceColumns,
    columns_refusal,
    kafka_string_key,
)
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext.sqltypes import SqlType


def grouping_refusal(compiled: CompiledAggregate) -> str | None:
    """Why the aggregation groups record by record, or None: it groups a batch at a time."""
    if compiled.source.kind is SourceKind.TABLE:
        return "a table's changelog runs row by row"
    if compiled.join is not None or compiled.scope is None:
        return "a join"
    if calls_unvectorized(_nodes(compiled)):
        return "a Python function that is not vectorized"
    if any(len(call.arg_nodes) != len(call.args) for call in compiled.calls):
        return "an aggregate call's arguments are not all columns"
    return columns_refusal(compiled.source)


def _nodes(compiled: CompiledAggregate) -> list[exp.Expr]:
    """WHERE, the GROUP BY expressions and the calls' column arguments, as compiled."""
    nodes = [] if compiled.where_node is None else [compiled.where_node]
    nodes.extend(compiled.group_nodes)
    nodes.extend(n for call in compiled.calls for n in call.arg_nodes)
    return nodes


def grouping_line(compiled: CompiledAggregate, sink: Source | None = None) -> str:
    """EXPLAIN's line on how the aggregation groups its records: a batch at a time, with each
    expression's mode, or record by record and why; the aggregates are applied per group, and
    the updates written as `columnar_update.updates_line` says."""
    updates = updates_line(compiled, sink)
    why = grouping_refusal(compiled)
    if why is not None:
        return f"Execution: grouped record by record ({why}); aggregates per group; {updates}"
    assert compiled.scope is not None
    scope = compiled.scope
    parts = []
    if compiled.where_node is not None:
        parts.append(f"WHERE {vectorize(compiled.where_node, scope).mode}")
    parts.extend(
        f"GROUP BY {text} {vectorize(node, scope).mode}"
        for text, node in zip(compiled.group_by_text, compiled.group_nodes, strict=True)
    )
    for call in compiled.calls:
        if call.arg_nodes:
            modes = {vectorize(n, scope).mode for n in call.arg_nodes}
            mode = modes.pop() if len(modes) == 1 else "partly vectorized"
            parts.append(f"{call.text} arguments {mode}")
    if compiled.window is None and _counts(compiled) is not None:
        # `AggregatePipeline.combines` also asks for buffering, a server setting EXPLAIN does not see
        parts.append("counts and sums combined per group by Arrow where updates are buffered")
    return (
        f"Execution: grouped in Arrow batches; {', '.join(parts)}; aggregates per group; {updates}"
    )


class ColumnarGrouping:
    """An aggregation's stage 1, a batch at a time (see the module docstring)."""

    def __init__(self, pipeline: AggregatePipeline) -> None:
        why = grouping_refusal(pipeline.compiled)
        if why is not None:
            raise ValueError(f"query {pipeline.query_id} groups record by record: {why}")
        self.pipeline = pipeline
        compiled = pipeline.compiled
        scope = compiled.scope
        assert scope is not None
        self._source = SourceColumns(compiled.source, pipeline.source_serde, scope.columns)
        self._where = None if compiled.where_node is None else vectorize(compiled.where_node, scope)
        self._keys = tuple(vectorize(n, scope) for n in compiled.group_nodes)
        self._args = tuple(
            tuple(vectorize(n, scope) for n in call.arg_nodes) for call in compiled.calls
        )
        self._string_group = (
            kafka_string_key(pipeline.sink)
            and len(compiled.key_columns) == 1
            and compiled.key_columns[0].type == STRING
        )
        self._counts = _counts(compiled) if pipeline.combines else None
        self.fallbacks = 0  # batches the vectorized steps failed on, grouped per record instead

    def group(
        self, records: Sequence[InputRecord], running: dict[int, int] | None = None
    ) -> tuple[list[GroupedRow | TableChange], list[ProcessingError]]:
        """What `AggregatePipeline.group` gives ``records``: their grouped rows and the records
        skipped, in input order."""
        items, errors = self._grouped(records, running)
        return [e if isinstance(e, GroupedRow | TableChange) else _row(e) for e in items], errors

    def group_combined(
        self, records: Sequence[InputRecord], running: dict[int, int] | None = None
    ) -> tuple[list[GroupedRow | TableChange], list[ProcessingError]]:
        """`group`, then `AggregatePipeline.combined` (combined per group where the pipeline
        combines and that halves the rows), without making a row per record first; a clean
        batch of one partition whose calls are all COUNT or integer SUM combines on its columns
        (`_counted`)."""
        pipeline = self.pipeline
        if not pipeline.combines:
            return self.group(records, running)
        ranks = batch_ranks(records, {} if running is None else running)
        if not records:
            return [], []
        try:
            computed = self._computed(records)
            if (
                self._counts is not None
                and computed.clean
                and len({r.partition for r in records}) == 1
                and halves(computed.groups)  # type: ignore[arg-type]  # clean: no None
            ):
                return self._counted(computed, records, ranks), []
            items: Sequence[_Entry | GroupedRow | TableChange]
            items, errors = self._entries_of(computed, records, ranks)
        except Exception:  # noqa: BLE001 - a kernel's surprise: the per-record path decides
            self.fallbacks += 1
            items, errors = pipeline.group_ranked(zip(ranks, records, strict=True))
        flat: list[_Entry] = []
        if not errors and all(type(e) is tuple for e in items):
            flat = items  # type: ignore[assignment]  # every row computed on the columns
        else:
            for e in items:  # a stream's rows: no table changes
                if isinstance(e, GroupedRow):  # first: a `GroupedRow` is a (named) tuple too
                    flat.append(_entry(e))
                elif isinstance(e, tuple):
                    flat.append(e)
        if not halves([e[0] for e in flat]):  # `AggregatePipeline.worth_combining`
            return [_row(e) for e in flat], errors
        return _combined(flat, pipeline), errors

    def _grouped(
        self, records: Sequence[InputRecord], running: dict[int, int] | None
    ) -> tuple[Sequence[_Entry | GroupedRow | TableChange], list[ProcessingError]]:
        """`_entries_of` the ranked records; where the vectorized steps fail on the batch, the
        per-record path's rows for all of it."""
        ranks = batch_ranks(records, {} if running is None else running)
        if not records:
            return [], []
        try:
            return self._entries_of(self._computed(records), records, ranks)
        except Exception:  # noqa: BLE001 - a kernel's surprise: the per-record path decides
            self.fallbacks += 1
            return self.pipeline.group_ranked(zip(ranks, records, strict=True))

    def _computed(self, records: Sequence[InputRecord]) -> _Computed:
        """The batch's columns: decoded, kept by WHERE, with each kept row's group, grouping
        values and call arguments, and the rows that must run per record."""
        batch, bad = self._source.decode(records)
        for i, r in enumerate(records):
            if r.value is None or r.row is not None:
                bad.setdefault(i, "per record")
        stamps = batch.values("ROWTIME")
        if self._where is not None:
            keep = pc.fill_null(self._where.run(batch, bad), False)
            kept = pc.indices_nonzero(keep)
            batch = batch.take(kept)
            rows: list[int] = kept.to_pylist()
        else:
            rows = list(range(len(records)))
        stage_bad: dict[int, str] = {}
        keys = [_values(v.run(batch, stage_bad)) for v in self._keys]
        args = [[v.run(batch, stage_bad) for v in call] for call in self._args]
        return _Computed(rows, stamps, keys, args, self._groups(keys, len(rows)), bad, stage_bad)

    def _entries_of(
        self, c: _Computed, records: Sequence[InputRecord], ranks: list[int]
    ) -> tuple[list[_Entry | GroupedRow], list[ProcessingError]]:
        """Each record's grouped row, in input order: an `_Entry` where the columns computed it,
        what the per-record path gives elsewhere; and the records skipped."""
        rows, stamps, groups, bad, stage_bad = c.rows, c.stamps, c.groups, c.bad, c.stage_bad
        size = len(rows)
        # each row's grouping values and, per call, its arguments: tuples zipped from the columns
        values = list(zip(*c.keys, strict=True)) if c.keys else [()] * size
        calls = [
            list(zip(*(_values(column) for column in call), strict=True)) if call else [()] * size
            for call in c.args
        ]
        adds = list(zip(*calls, strict=True)) if calls else [()] * size
        grouped: dict[int, _Entry] = {}
        for j, i in enumerate(rows):
            if i in bad or j in stage_bad:
                continue
            group = groups[j]
            row_values = values[j]
            if group is None or None in row_values:
                bad[i] = "per record"  # its error (a NULL grouping value) is the per-record path's
                continue
            r = records[i]
            grouped[i] = (
                group,
                row_values,
                adds[j],
                stamps[i],
                r.partition,
                r.offset,
                r.key,
                ranks[i],
            )
        for j, why in stage_bad.items():
            bad.setdefault(rows[j], why)
        if not bad:
            return list(grouped.values()), []
        out: list[_Entry | GroupedRow] = []
        errors: list[ProcessingError] = []
        group_record = self.pipeline.group_record
        for i in sorted(grouped.keys() | bad.keys()):
            found = grouped.get(i)
            if found is not None:
                out.append(found)
            else:
                slow: list[GroupedRow | TableChange] = []
                group_record(records[i], ranks[i], slow, errors)
                out.extend(r for r in slow if isinstance(r, GroupedRow))  # a stream's: no changes
        return out, errors

    def _counted(
        self, c: _Computed, records: Sequence[InputRecord], ranks: list[int]
    ) -> list[GroupedRow | TableChange]:
        """What `_combined` gives a clean batch of one partition (input order is then batch
        order) whose calls are all COUNT or integer SUM (`_counts`), computed per group by Arrow:
        the count of its rows (``COUNT(*)``) or of its non-NULL arguments, the sum of those
        wrapped as Java wraps it (modular arithmetic: the same in any order), its newest time,
        and its last row's place; in the order of each group's first row."""
        assert self._counts is not None
        size = len(c.rows)
        if size == 0:
            return []
        stamps = c.stamps
        columns: dict[str, pa.Array] = {
            "g": pa.array(c.groups, pa.binary()),
            "p": pa.array(range(size), pa.int64()),
            "t": pa.array([stamps[i] for i in c.rows], pa.int64()),
        }
        aggregations: list[tuple[Any, ...]] = [("p", "min"), ("p", "max"), ("t", "max")]
        for n, ((kind, _type), call) in enumerate(zip(self._counts, c.args, strict=True)):
            if kind == "rows":
                aggregations.append(("p", "count"))
                continue
            (column,) = call
            name = f"a{n}"
            if kind == "count":
                columns[name] = _present(column)
                aggregations.append((name, "count", pc.CountOptions("only_valid")))
            else:
                columns[name] = column if isinstance(column, pa.Array) else pa.array(column)
                aggregations.append((name, "sum", pc.ScalarAggregateOptions(min_count=0)))
        table = pa.table(columns).group_by("g", use_threads=False).aggregate(aggregations)
        # pyarrow puts the key column first (older versions: last); the aggregates keep their order
        first = 1 if table.schema.names[0] == "g" else 0
        table = table.sort_by([(table.schema.names[first], "ascending")])
        got = [table.column(first + k).to_pylist() for k in range(len(aggregations))]
        lasts, newest = got[1], got[2]
        partials = [
            [wrap_int(v, t) for v in got[3 + n]] if kind == "sum" else got[3 + n]
            for n, (kind, t) in enumerate(self._counts)
        ]
        out: list[GroupedRow | TableChange] = []
        groups, keys, rows = c.groups, c.keys, c.rows
        for g, j in enumerate(lasts):
            i = rows[j]
            r = records[i]
            out.append(
                GroupedRow(
                    groups[j],  # clean: no None
                    tuple(column[j] for column in keys),
                    None,
                    None,
                    newest[g],
                    r.partition,
                    r.offset,
                    0,
                    r.key,
                    ranks[i],
                    [partial[g] for partial in partials],
                )
            )
        return out

    def _groups(self, keys: list[list[Any]], size: int) -> list[bytes | None]:
        """Each row's group: its grouping values as the sink's key (None: run it per record)."""
        if self._string_group:
            (column,) = keys
            return [None if v is None else v.encode() for v in column]
        serialize = self.pipeline.serialize_group
        out: list[bytes | None] = []
        for values in zip(*keys, strict=True) if keys else [()] * size:
            try:
                out.append(serialize(values))
            except Exception:  # noqa: BLE001 - the per-record path reports it
                out.append(None)
        return out


def _values(column: Column) -> list[Any]:
    return column if isinstance(column, list) else column.to_pylist()


def _counts(compiled: CompiledAggregate) -> tuple[tuple[str, SqlType], ...] | None:
    """Each call's kind where every one is a COUNT (``rows``: ``COUNT(*)``; ``count``: of a
    column) or a SUM of INTEGER or BIGINT (``sum``), with its type: calls `_counted` combines on
    columns. None otherwise."""
    kinds: list[tuple[str, SqlType]] = []
    for call in compiled.calls:
        udaf, arity = call.udaf, len(call.arg_nodes)
        if udaf.name == "COUNT" and arity <= 1:
            kinds.append(("count" if arity else "rows", udaf.return_type))
        elif udaf.name == "SUM" and arity == 1 and udaf.return_type in (INTEGER, BIGINT):
            kinds.append(("sum", udaf.return_type))
        else:
            return None
    return tuple(kinds)


def _present(column: Column) -> pa.Array:
    """A column whose NULLs are the column's (what ``COUNT(column)`` leaves out)."""
    if isinstance(column, pa.Array):
        return column
    return pa.array([None if v is None else True for v in column], pa.bool_())


@dataclass(frozen=True, slots=True)
class _Computed:
    """A batch through `ColumnarGrouping._computed`: ``rows`` the input index of each row WHERE
    kept; ``stamps`` each input record's time; per kept row its group (None: run per record),
    grouping values (one list per GROUP BY expression) and per call its argument columns;
    ``bad`` input rows and ``stage_bad`` kept rows to run per record, with why."""

    rows: list[int]
    stamps: list[Any]
    keys: list[list[Any]]
    args: list[list[Column]]
    groups: list[bytes | None]
    bad: dict[int, str]
    stage_bad: dict[int, str]

    @property
    def clean(self) -> bool:
        """Whether every row computed on the columns: none to run per record."""
        return (
            not self.bad
            and not self.stage_bad
            and None not in self.groups
            and not any(None in column for column in self.keys)
        )


#: A stream record's grouped row before it is one (`GroupedRow`'s fields, a tuple is cheaper):
#: group, grouping values, arguments, timestamp, partition, offset, source key, rank.
_Entry = tuple[
    bytes, tuple[Any, ...], tuple[tuple[Any, ...], ...], int, int, int, bytes | None, int
]
_ORDER = operator.itemgetter(7, 4, 5)  # an entry's `GroupedRow.order` (a stream row's seq is 0)


def _row(e: _Entry) -> GroupedRow:
    # the tuple's own constructor: a named tuple's ``__new__`` is a Python function (a call and
    # its keyword defaults per row)
    return _new_row(GroupedRow, (e[0], e[1], e[2], None, e[3], e[4], e[5], 0, e[6], e[7], None))


_new_row = tuple.__new__


def _entry(row: GroupedRow) -> _Entry:
    assert row.add is not None
    return (
        row.group,
        row.keys,
        row.add,
        row.timestamp,
        row.partition,
        row.offset,
        row.source_key,
        row.rank,
    )


def _combined(entries: list[_Entry], pipeline: AggregatePipeline) -> list[GroupedRow | TableChange]:
    """`AggregatePipeline.combine` of the entries' rows: per group, in batch order, the partial
    aggregates of its rows, at the place of its last row, with its newest timestamp."""
    calls = pipeline.compiled.calls
    adds = [c.udaf.add for c in calls]
    width = range(len(adds))
    combined: dict[bytes, list[Any]] = {}  # group -> [its last entry, partials, newest time]
    for e in sorted(entries, key=_ORDER):
        found = combined.get(e[0])
        if found is None:
            found = combined[e[0]] = [e, [c.udaf.initial() for c in calls], e[3]]
        else:
            found[0] = e
            if e[3] > found[2]:  # noqa: PLR1730 - max() is a call per record
                found[2] = e[3]
        partial, add, order = found[1], e[2], (e[7], e[4], e[5], 0)
        for i in width:
            partial[i] = adds[i](partial[i], add[i], order)
    return [
        GroupedRow(
            last[0], last[1], None, None, newest, last[4], last[5], 0, last[6], last[7], partial
        )
        for last, partial, newest in combined.values()
    ]
