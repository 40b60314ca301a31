"""An aggregation's stage 3 a call at a time: the groups' updates written as columns. Pure.

`AggregatePipeline.aggregate` defines a group's updates group by group; with buffering (one update
per group per micro-batch) `ColumnarUpdates.aggregate` gives the same updates for all the groups of
one call (a state bucket's rows) at once:

1. each group's rows are applied to its state in input order (`AggregatePipeline.apply`: the
   functions' own ``add`` and ``merge``, record by record, as the per-group path applies them);
2. the aggregated rows (grouping values, the functions' results) become columns; HAVING and the
   projection run as Arrow kernels where those give the per-record values and per row elsewhere
   (`engine/columnar/kernels.py`); a JSON sink's values are written as columns of JSON fragments
   (`columnar_run.value_bytes`); the sink partitions are Kafka's murmur2 over the keys at once
   (`engine/columnar/partitions.py`);
3. a group whose update a vectorized step could not compute (a value a column cannot hold, a
   per-row function that raised, a value the sink cannot write) writes it through
   `AggregatePipeline.write`, which reports it with the per-group path's message.

So the updates, skipped records and states are the per-group path's whatever the rows are
(tests/engine/test_columnar_update.py holds both equal on random aggregations and records); the
updates come in another order, which nothing reads (the sink orders a batch by source position).

Aggregations it does not run (`updates_refusal` says why; they write group by group): without
buffering (every row writes an update), TABLE sources (a change is an undo and an add), windows
(a window's updates, closings and EMIT FINAL), Python functions that are not vectorized, a
TIMESTAMP column on the sink, and a sink whose value columns differ from the projection's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from sqlglot import exp

from headwater.engine.columnar.batch import Batch, Column, to_column
from headwater.engine.columnar.kernels import vectorize
from headwater.engine.columnar.partitions import partitions_of
from headwater.engine.formats.serde import json_object_values
from headwater.engine.persistent.aggregate_plan import CompiledAggregate, agg_name, group_name
from headwater.engine.persistent.aggregate_run import (
    ROW_ORDER,
    AggregatePipeline,
    GroupedRow,
    GroupState,
)
from headwater.engine.persistent.columnar_run import calls_unvectorized, value_bytes
from headwater.engine.persistent.query_run import OutputRecord, ProcessingError
from headwater.metastore.catalog import Source, SourceKind

#: The records stage 3 hands the sink (`engine/spark/schemas.AGGREGATED_SCHEMA`, as Arrow): a
#: skipped record has no key, its detail as value, its kind as ``error``.
AGGREGATED_ARROW = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
        ("partition", pa.int32()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("source_seq", pa.int32()),
        ("source_rank", pa.int64()),
        ("error", pa.string()),
    ]
)

#: A group's stored state (None: a new group), and where its new state goes.
Load = Callable[[bytes], GroupState | None]
Store = Callable[[bytes, GroupState], None]


def updates_refusal(
    compiled: CompiledAggregate, sink: Source | None, buffering: bool = True
) -> str | None:
    """Why the aggregation writes its updates group by group, or None: a call at a time."""
    if not buffering:
        return "every row writes an update (no buffering)"
    if compiled.source.kind is SourceKind.TABLE:
        return "a table's changes undo and add"
    if compiled.window is not None:
        return "a windowed aggregation"
    if compiled.post_scope is None:
        return "no scope compiled"
    if calls_unvectorized(_post_nodes(compiled)):
        return "a Python function that is not vectorized"
    if sink is not None and sink.timestamp_column is not None:
        return "a TIMESTAMP column on the sink"
    if sink is not None and [(c.name, c.type) for c in sink.value_columns] != [
        (c.name, c.type.sql()) for c in compiled.value_columns
    ]:
        return "the sink's value columns differ from the projection's"
    return None


def _post_nodes(compiled: CompiledAggregate) -> list[exp.Expr]:
    nodes = list(compiled.value_nodes)
    if compiled.having_node is not None:
        nodes.append(compiled.having_node)
    return nodes


def updates_line(compiled: CompiledAggregate, sink: Source | None) -> str:
    """EXPLAIN's words on how the updates are written: a call's in Arrow batches (where updates
    are buffered, a server setting EXPLAIN does not see), with HAVING's and each value's mode, or
    group by group and why."""
    why = updates_refusal(compiled, sink)
    if why is not None:
        return f"updates per group ({why})"
    scope = compiled.post_scope
    assert scope is not None
    parts = []
    if compiled.having_node is not None:
        parts.append(f"HAVING {vectorize(compiled.having_node, scope).mode}")
    parts.extend(
        f"{c.name} {vectorize(n, scope).mode}"
        for c, n in zip(compiled.value_columns, compiled.value_nodes, strict=True)
    )
    return f"updates in Arrow batches where buffered ({', '.join(parts)})"


class ColumnarUpdates:
    """An aggregation's stage 3, a call at a time (see the module docstring)."""

    def __init__(self, pipeline: AggregatePipeline) -> None:
        why = updates_refusal(pipeline.compiled, pipeline.sink, pipeline.buffering)
        if why is not None:
            raise ValueError(f"query {pipeline.query_id} writes its updates per group: {why}")
        self.pipeline = pipeline
        compiled = pipeline.compiled
        scope = compiled.post_scope
        assert scope is not None
        self._scope = scope
        self._values = tuple(vectorize(n, scope) for n in compiled.value_nodes)
        self._having = (
            None if compiled.having_node is None else vectorize(compiled.having_node, scope)
        )
        self._group_names = [group_name(i) for i in range(len(compiled.group_keys))]
        self._agg_names = [agg_name(i) for i in range(len(compiled.calls))]
        self._results = [call.udaf.result for call in compiled.calls]
        sink = pipeline.sink
        self._value_names = [c.name for c in compiled.value_columns]
        self._value_types = [c.type for c in compiled.value_columns]
        self._serde = None if json_object_values(sink) else pipeline.sink_serde
        self._partitions = sink.partitions

    def aggregate(
        self, rows: Sequence[GroupedRow], load: Load, store: Store
    ) -> tuple[pa.RecordBatch, list[OutputRecord], list[ProcessingError]]:
        """One call's rows applied to their groups' states (``load``, then ``store`` once per
        group): the updates as a batch of `AGGREGATED_ARROW`, the updates written group by group
        (where a vectorized step could not), and the records skipped."""
        pipeline = self.pipeline
        errors: list[ProcessingError] = []
        states: dict[bytes, GroupState] = {}
        last: dict[bytes, GroupedRow | None] = {}  # None: its last row was skipped
        for row in sorted(rows, key=ROW_ORDER):
            group = row.group
            state = states.get(group)
            if state is None:
                state = states[group] = load(group) or pipeline.initial_state()
            last[group] = row if pipeline.apply(state, row, errors) else None
        written = [(g, r) for g, r in last.items() if r is not None]
        slow: list[OutputRecord] = []
        batch = self._written(written, states, slow, errors)
        for group, state in states.items():
            store(group, state)
        return batch, slow, errors

    def _written(
        self,
        written: list[tuple[bytes, GroupedRow]],
        states: dict[bytes, GroupState],
        slow: list[OutputRecord],
        errors: list[ProcessingError],
    ) -> pa.RecordBatch:
        """The updates of the groups ``written`` names (each with its last row), their states'
        ``passed`` set as written; onto ``slow`` those written group by group."""
        size = len(written)
        if size == 0:
            return _empty()
        scope = self._scope.columns
        bad: dict[int, str] = {}
        columns: dict[str, Column] = {}
        rows = [r for _g, r in written]
        for i, name in enumerate(self._group_names):
            columns[name] = self._column([r.keys[i] for r in rows], scope[name], bad)
        aggregates = [states[g].aggregates for g, _r in written]
        for i, (name, result) in enumerate(zip(self._agg_names, self._results, strict=True)):
            columns[name] = self._column([result(a[i]) for a in aggregates], scope[name], bad)
        batch = Batch(size, columns)
        if self._having is None:
            passes: list[bool] = [True] * size
        else:
            having_bad: dict[int, str] = {}
            column = self._having.run(batch, having_bad)
            passes = [v is True for v in _values(column)]
            bad.update({j: why for j, why in having_bad.items() if j not in bad})
        value_bad: dict[int, str] = {}
        values = value_bytes(
            [v.run(batch, value_bad) for v in self._values],
            self._value_names,
            self._value_types,
            self._serde,
            value_bad,
        )
        keep: list[int] = []
        value_of: list[bytes | None] = values.to_pylist()
        pipeline = self.pipeline
        for j, (group, row) in enumerate(written):
            state = states[group]
            if j in bad or (passes[j] and j in value_bad):
                record = pipeline.write(state, row, errors)  # its own message, or its update
                if record is not None:
                    slow.append(record)
                continue
            if passes[j]:
                state.passed = True
            elif state.passed:
                state.passed = False
                value_of[j] = None  # a tombstone: the group stops passing HAVING
            else:
                continue  # never passed: nothing to write
            keep.append(j)
        keys = [written[j][0] for j in keep]
        kept_rows = [rows[j] for j in keep]
        return pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array([value_of[j] for j in keep], pa.binary()),
                pa.array([states[g].timestamp for g in keys], pa.int64()),
                pa.array(partitions_of(keys, self._partitions), pa.int32()),
                pa.array([r.partition for r in kept_rows], pa.int32()),
                pa.array([r.offset for r in kept_rows], pa.int64()),
                pa.array([r.seq for r in kept_rows], pa.int32()),
                pa.array([r.rank for r in kept_rows], pa.int64()),
                pa.nulls(len(keep), pa.string()),
            ],
            schema=AGGREGATED_ARROW,
        )

    @staticmethod
    def _column(values: list[Any], sql_type: Any, bad: dict[int, str]) -> Column:
        column, wrong = to_column(values, sql_type)
        bad.update({j: why for j, why in wrong.items() if j not in bad})
        return column


def _values(column: Column) -> list[Any]:
    return column if isinstance(column, list) else column.to_pylist()


def _empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=AGGREGATED_ARROW)
