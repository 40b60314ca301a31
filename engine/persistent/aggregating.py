"""An aggregating persistent query, as the stages Spark chains: group, (change,) aggregate. Pure.

1. **group** (per source partition, record by record): decode, WHERE, the grouping values and the
   aggregate calls' arguments. A record whose grouping value is NULL is skipped and logged, as
   ksqlDB does ("Group-by column with index 0 resolved to null").
2. **change** (over a TABLE source only, per source key): a table's record replaces the key's
   previous row, so its effect is "take the old row out of its group, put the new one in". The
   stage keeps each key's last grouped row and emits the undo and the add (one combined row when
   both fall in the same group, as Kafka Streams' KTable re-partition does).
3. **aggregate** (per group): the aggregate functions' states, one update per input row in input
   order (ksqlDB with ``cache.max.bytes.buffering=0``) or only the last update of each group per
   batch (with buffering); HAVING turns an update into a tombstone when the group stops passing it
   after having passed, and into nothing when it never passed, as Kafka Streams' table filter does.
   An output's timestamp is the largest timestamp of the rows aggregated so far.

Each stage is a function of plain data (rows and states pickle), so the same code runs in Spark's
tasks (`headwater.engine.spark`) and in the in-process conformance runner, and a replayed batch
gives the same output records in the same order.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.engine import _functions as fn
from headwater.engine.errors import EngineError
from headwater.engine.partitioner import partition_for
from headwater.engine.persistent.aggregate import (
    CompiledAggregate,
    agg_name,
    compile_aggregate,
    group_name,
)
from headwater.engine.persistent.operators import (
    InputRecord,
    OutputRecord,
    ProcessingError,
    RecordError,
    RowReader,
    _message,
    _timestamp_reader,
    parse_persistent,
)
from headwater.engine.serde import RowSerde
from headwater.metastore.catalog import Catalog, Query, Source, SourceKind

Args = tuple[tuple[Any, ...], ...]  # per aggregate call, the values of its column arguments


@dataclass(frozen=True, slots=True)
class GroupedRow:
    """A source row on its way to its group.

    Attributes:
        group: the group's identity: its key as the sink writes it.
        keys: the grouping values.
        add: the arguments to add to the group's aggregates (None: nothing to add).
        undo: the arguments to take out of them (a table row's previous version), or None.
        source_key: the source record's key (a TABLE source's row identity), for the change stage.
    """

    group: bytes
    keys: tuple[Any, ...]
    add: Args | None
    undo: Args | None
    timestamp: int
    partition: int
    offset: int
    seq: int = 0
    source_key: bytes | None = None

    def order(self) -> tuple[int, int, int]:
        """Input order: source partition, offset, then undo before add."""
        return (self.partition, self.offset, self.seq)


@dataclass(frozen=True, slots=True)
class TableChange:
    """A TABLE source record, grouped: its key and its new row (None: deleted or filtered out)."""

    source_key: bytes
    row: GroupedRow | None
    timestamp: int
    partition: int
    offset: int


@dataclass
class GroupState:
    """One group's aggregates: the functions' states, the newest timestamp, whether the last
    update passed HAVING (and so was written)."""

    aggregates: list[Any]
    timestamp: int = 0
    passed: bool = False


def is_aggregate_statement(statement_text: str) -> bool:
    """Whether a persistent query's statement aggregates (so runs as `AggregatePipeline`)."""
    select, _sink = parse_persistent(statement_text)
    return bool(select.group_by)


class AggregatePipeline:
    """The stages of one aggregating query."""

    def __init__(self, query_id: str, compiled: CompiledAggregate, sink: Source,
                 custom_types: Mapping[str, Any], buffering: bool = False) -> None:  # fmt: skip
        self.query_id = query_id
        self.compiled = compiled
        self.sink = sink
        self.buffering = buffering
        self.table_source = compiled.source.kind is SourceKind.TABLE
        self._reader = RowReader(compiled.source, custom_types)
        self._sink_serde = RowSerde.for_source(sink, custom_types)
        self._sink_time = None if sink.timestamp_column is None else _timestamp_reader(sink)
        self._key_names = [c.name for c in compiled.key_columns]
        self._value_names = [c.name for c in compiled.value_columns]

    @classmethod
    def for_query(cls, query: Query, catalog: Catalog, buffering: bool = False) -> AggregatePipeline:
        """The pipeline of a query the catalog holds (its sink exists there)."""
        select, sink_name = parse_persistent(query.statement_text)
        sink = catalog.source(sink_name)
        if sink is None:
            raise EngineError(f"query {query.id}: its sink {sink_name} is not in the catalog")
        return cls(query.id, compile_aggregate(select, catalog, sink_name), sink,
                   dict(catalog.types), buffering)  # fmt: skip

    # -- stage 1 ---------------------------------------------------------------------------------

    def group(self, records: Iterable[InputRecord]
              ) -> tuple[list[GroupedRow | TableChange], list[ProcessingError]]:  # fmt: skip
        """Stage 1: each record's grouped row (a `TableChange` for a TABLE source)."""
        out: list[GroupedRow | TableChange] = []
        errors: list[ProcessingError] = []
        for record in records:
            try:
                row = self._group_one(record)
            except RecordError as exc:
                errors.append(self._error(exc.kind, exc.message, record))
                if self.table_source and record.key is not None:
                    # the row can no longer be read: for the table, the key's row is gone
                    out.append(TableChange(record.key, None, record.timestamp, record.partition,
                                           record.offset))  # fmt: skip
                continue
            if self.table_source:
                if record.key is None:
                    continue  # a table's record without a key: ksqlDB drops it
                out.append(TableChange(record.key, row, record.timestamp, record.partition,
                                       record.offset))  # fmt: skip
            elif row is not None:
                out.append(row)
        return out, errors

    def _group_one(self, record: InputRecord) -> GroupedRow | None:
        compiled = self.compiled
        try:
            value = self._reader.serde.deserialize_value(record.value)
        except (EngineError, ValueError, TypeError) as exc:
            raise RecordError("deserialization", _message(exc)) from exc
        if value is None:
            return None  # a stream's record without a value; a table's tombstone
        view = self._reader.view(record, value)
        if compiled.row_filter is not None and compiled.row_filter(view) is not True:
            return None
        try:
            keys = tuple(f(view) for f in compiled.group_keys)
            for index, key in enumerate(keys):
                if key is None:
                    raise RecordError("serialization", f"Group-by column with index {index} "
                                      "resolved to null. The source row will be excluded from "
                                      "the table.")  # fmt: skip
            args = tuple(tuple(f(view) for f in call.args) for call in compiled.calls)
            group = self._sink_serde.serialize_key(list(keys))
        except RecordError:
            raise
        except (EngineError, fn.EvalFailure, ValueError, TypeError) as exc:
            raise RecordError("serialization", _message(exc)) from exc
        assert group is not None
        return GroupedRow(group, keys, args, None, int(view["ROWTIME"]), record.partition,
                          record.offset, 0, record.key)  # fmt: skip

    # -- stage 2 (TABLE sources) ------------------------------------------------------------------

    def change(self, previous: GroupedRow | None, change: TableChange) -> list[GroupedRow]:
        """Stage 2: the rows a table record sends to its groups, given the key's previous row
        (the caller keeps ``change.row`` as the key's row from then on)."""
        new = change.row
        position = (change.timestamp, change.partition, change.offset)
        if previous is not None and new is not None and previous.group == new.group:
            return [GroupedRow(new.group, new.keys, new.add, previous.add, *position, 0)]
        rows = []
        if previous is not None:
            rows.append(GroupedRow(previous.group, previous.keys, None, previous.add,
                                   *position, 0))  # fmt: skip
        if new is not None:
            rows.append(GroupedRow(new.group, new.keys, new.add, None, new.timestamp,
                                   change.partition, change.offset, 1))  # fmt: skip
        return rows

    # -- stage 3 ---------------------------------------------------------------------------------

    def initial_state(self) -> GroupState:
        """A new group's state."""
        return GroupState([call.udaf.initial() for call in self.compiled.calls])

    def aggregate(self, state: GroupState | None, rows: Sequence[GroupedRow]
                  ) -> tuple[GroupState, list[OutputRecord], list[ProcessingError]]:  # fmt: skip
        """Stage 3: one group's rows (any order: they are sorted by input position) applied to
        its state; the updates to write (one per row, or the last one with buffering)."""
        if state is None:
            state = self.initial_state()
        calls = self.compiled.calls
        out: list[OutputRecord] = []
        errors: list[ProcessingError] = []
        for row in sorted(rows, key=GroupedRow.order):
            aggregates = state.aggregates
            if row.undo is not None:
                for i, call in enumerate(calls):
                    undo = call.udaf.undo
                    assert undo is not None  # compile refuses such functions over tables
                    aggregates[i] = undo(aggregates[i], row.undo[i])
            if row.add is not None:
                for i, call in enumerate(calls):
                    aggregates[i] = call.udaf.add(aggregates[i], row.add[i])
            state.timestamp = max(state.timestamp, row.timestamp)
            try:
                record = self._update(state, row)
            except RecordError as exc:
                errors.append(ProcessingError(self.query_id, exc.kind, exc.message,
                                              self.compiled.source.topic, row.partition,
                                              row.offset))  # fmt: skip
                continue
            if record is not None:
                out.append(record)
        if self.buffering and out:
            out = out[-1:]
        return state, out, errors

    def _update(self, state: GroupState, row: GroupedRow) -> OutputRecord | None:
        compiled = self.compiled
        view: dict[str, Any] = {group_name(i): k for i, k in enumerate(row.keys)}
        view.update({agg_name(i): call.udaf.result(a)
                     for i, (call, a) in enumerate(zip(compiled.calls, state.aggregates))})  # fmt: skip
        passes = compiled.having is None or compiled.having(view) is True
        timestamp = state.timestamp
        if not passes:
            if not state.passed:
                return None
            state.passed = False
            return OutputRecord(row.group, None, timestamp, self._partition(row.group),
                                row.partition, row.offset, row.seq)  # fmt: skip
        try:
            values = {name: f(view) for name, f in zip(self._value_names, compiled.values)}
            value_bytes = self._sink_serde.serialize_value(values)
        except (EngineError, fn.EvalFailure, ValueError, TypeError) as exc:
            raise RecordError("serialization", _message(exc)) from exc
        if self._sink_time is not None:
            values.update(zip(self._key_names, row.keys))
            try:
                timestamp = self._sink_time(values)
            except (EngineError, fn.EvalFailure, ValueError, TypeError) as exc:
                raise RecordError("timestamp", _message(exc)) from exc
        state.passed = True
        return OutputRecord(row.group, value_bytes, timestamp, self._partition(row.group),
                            row.partition, row.offset, row.seq)  # fmt: skip

    def _partition(self, key: bytes) -> int:
        return partition_for(key, self.sink.partitions)

    def _error(self, kind: str, message: str, record: InputRecord) -> ProcessingError:
        return ProcessingError(self.query_id, kind, message, self.compiled.source.topic,
                               record.partition, record.offset)  # fmt: skip


class LocalAggregation:
    """The three stages run in one process over keyed state held in dicts: the conformance
    runner's and the tests' way to run an aggregating query (Spark runs the same stages)."""

    def __init__(self, pipeline: AggregatePipeline) -> None:
        self.pipeline = pipeline
        self.compiled = pipeline.compiled
        self.sink = pipeline.sink
        self._rows: dict[bytes, GroupedRow | None] = {}
        self._groups: dict[bytes, GroupState] = {}

    def process(self, records: Iterable[InputRecord]
                ) -> tuple[list[OutputRecord], list[ProcessingError]]:  # fmt: skip
        """The sink records of ``records``, in input order, and the records skipped."""
        grouped, errors = self.pipeline.group(records)
        rows: list[GroupedRow] = []
        for item in grouped:
            if isinstance(item, TableChange):
                previous = self._rows.get(item.source_key)
                rows.extend(self.pipeline.change(previous, item))
                self._rows[item.source_key] = item.row
            else:
                rows.append(item)
        by_group: dict[bytes, list[GroupedRow]] = {}
        for row in rows:
            by_group.setdefault(row.group, []).append(row)
        out: list[OutputRecord] = []
        for group, members in by_group.items():
            state = self._groups.get(group)
            state = pickle.loads(pickle.dumps(state)) if state is not None else None  # as Spark
            state, records_out, more_errors = self.pipeline.aggregate(state, members)
            self._groups[group] = state
            errors.extend(more_errors)
            out.extend(records_out)
        out.sort(key=OutputRecord.order)
        return out, errors
