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

import operator
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, NamedTuple

from headwater.engine.errors import EngineError
from headwater.engine.formats.serde import RowSerde
from headwater.engine.formats.windows import windowed_key
from headwater.engine.functions import user_index
from headwater.engine.partitioner import PartitionMemo
from headwater.engine.persistent.aggregate_plan import (
    CompiledAggregate,
    agg_name,
    compile_aggregate,
    group_name,
    is_aggregation,
)
from headwater.engine.persistent.query_run import (
    InputRecord,
    OutputRecord,
    ProcessingError,
    RecordError,
    RowReader,
    _message,
    function_failures,
    parse_persistent,
    skipped,
    timestamp_reader,
)
from headwater.metastore.catalog import Catalog, Query, Source, SourceKind

Args = tuple[tuple[Any, ...], ...]  # per aggregate call, the values of its column arguments


class GroupedRow(NamedTuple):
    """A source row on its way to its group (a named tuple: one is made per record in stage 1
    and again when stage 3 unpickles it, and a frozen dataclass's ``__init__`` costs an
    ``object.__setattr__`` per field: 1.3 of a 1M-key count's ~10 us per record in stage 1).

    Attributes:
        group: the group's identity: its key as the sink writes it.
        keys: the grouping values.
        add: the arguments to add to the group's aggregates (None: nothing to add).
        undo: the arguments to take out of them (a table row's previous version), or None.
        source_key: the source record's key (a TABLE source's row identity), for the change stage.
        rank: its place in the batch's order (`rank_records`).
        partial: instead of ``add``, the aggregates of several rows (`AggregatePipeline.combine`),
            merged into the group's; the row's position is that of the last of them.
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
    rank: int = 0
    partial: list[Any] | None = None  # `combine`'s partial aggregates of several rows

    def order(self) -> tuple[int, int, int, int]:
        """The order rows are aggregated in (see `rank_records`), then undo before add."""
        return (self.rank, self.partition, self.offset, self.seq)


#: `GroupedRow.order` as a C function of the row (its fields rank, partition, offset, seq): a
#: sort key or an order made once per row in stage 3, where a method call per row counts.
ROW_ORDER: Callable[[GroupedRow], tuple[int, int, int, int]] = operator.itemgetter(9, 5, 6, 7)


@dataclass(frozen=True, slots=True)
class TableChange:
    """A TABLE source record, grouped: its key and its new row (None: deleted or filtered out)."""

    source_key: bytes
    row: GroupedRow | None
    timestamp: int
    partition: int
    offset: int
    rank: int = 0

    def __reduce__(self) -> tuple[type[TableChange], tuple[Any, ...]]:
        args = (self.source_key, self.row, self.timestamp, self.partition, self.offset, self.rank)
        return (TableChange, args)


def halves(groups: Sequence[bytes]) -> bool:
    """Whether rows of these groups, combined per group, would be at most half as many."""
    return len(set(groups)) * 2 <= len(groups)


def rank_records(
    records: Iterable[InputRecord], running: dict[int, int]
) -> Iterator[tuple[int, InputRecord]]:
    """Each record with its rank: the highest timestamp its partition has shown so far in the
    batch (``running`` holds it per partition, across calls).

    Aggregation and the sink order a micro-batch's records by (rank, partition, offset): each
    partition's records stay in offset order (ranks never decrease along a partition), and
    partitions interleave by event time, as Kafka Streams picks between partitions. The order is a
    function of each record alone, so every stage sees its share of the batch in the same order
    and a replayed batch comes out the same."""
    for record in records:
        rank = max(running.get(record.partition, record.timestamp), record.timestamp)
        running[record.partition] = rank
        yield rank, record


def batch_ranks(records: Sequence[InputRecord], running: dict[int, int]) -> list[int]:
    """`rank_records`' ranks as a list; for records of one partition (a source task's chunk),
    one running maximum of their times, computed in one step."""
    if not records or len({r.partition for r in records}) != 1:
        return [rank for rank, _ in rank_records(records, running)]
    partition = records[0].partition
    stamps = [r.timestamp for r in records]
    ranks = list(accumulate(stamps, max, initial=running.get(partition, stamps[0])))[1:]
    running[partition] = ranks[-1]
    return ranks


@dataclass
class GroupState:
    """One group's aggregates: the functions' states, the newest timestamp, whether the last
    update passed HAVING (and so was written)."""

    aggregates: list[Any]
    timestamp: int = 0
    passed: bool = False

    def __reduce__(self) -> tuple[type[GroupState], tuple[Any, ...]]:
        # pickled as its fields: without the copyreg state dict, 45 bytes instead of 124 for a
        # count and a sum, and faster both ways (a windowed group's windows are pickled together)
        return (GroupState, (self.aggregates, self.timestamp, self.passed))


@dataclass
class TaskState:
    """What a windowed aggregation keeps per task besides its groups' windows: the task's stream
    time, and an index of open windows (a time window's start, a session's end -> the groups
    with such a window), by which windows are emitted and released."""

    stream_time: int = -1
    closing: dict[int, list[bytes]] = field(default_factory=dict)
    store_time: int = -1  # the newest window start stored (Kafka's window store expires by it)
    last_emit: int = -1  # EMIT FINAL: the close time of the last emission


@dataclass
class GroupWindows:
    """One group's open windows: its grouping values and each window's state."""

    keys: tuple[Any, ...]
    windows: dict[tuple[int, int], GroupState] = field(default_factory=dict)

    def __reduce__(self) -> tuple[type[GroupWindows], tuple[Any, ...]]:
        return (GroupWindows, (self.keys, self.windows))


class WindowedTask:
    """One task's state during a batch: its `TaskState` and the `GroupWindows` of the groups the
    batch touches, loaded on first use through ``load`` (Spark's state store, or a dict). After
    the batch, ``changed`` holds the groups to write back (None: delete)."""

    def __init__(self, state: TaskState, load: Callable[[bytes], GroupWindows | None]) -> None:
        self.state = state
        self._load = load
        self._groups: dict[bytes, GroupWindows] = {}
        self.changed: dict[bytes, GroupWindows | None] = {}

    def _group(self, group: bytes) -> GroupWindows:
        found = self._groups.get(group)
        if found is None:
            found = self._load(group) or GroupWindows(())
            self._groups[group] = found
        return found

    def windows(self, group: bytes) -> dict[tuple[int, int], GroupState]:
        """The group's open windows (mutable: call `touch` after changing them)."""
        return self._group(group).windows

    def keys_of(self, group: bytes) -> tuple[Any, ...]:
        """The group's grouping values."""
        return self._group(group).keys

    def touch(self, group: bytes, keys: tuple[Any, ...]) -> None:
        """Marks the group changed (deleted once it has no open window)."""
        found = self._group(group)
        found.keys = keys
        self.changed[group] = found if found.windows else None

    def closes(self, bound: int, group: bytes) -> None:
        """Indexes one of the group's windows by ``bound`` (a time window's start, a session's
        end)."""
        groups = self.state.closing.setdefault(bound, [])
        if not groups or groups[-1] != group:
            groups.append(group)


def is_aggregate_statement(statement_text: str) -> bool:
    """Whether a persistent query's statement aggregates (so runs as `AggregatePipeline`)."""
    select, _sink = parse_persistent(statement_text)
    return is_aggregation(select)


class AggregatePipeline:
    """The stages of one aggregating query."""

    def __init__(
        self,
        query_id: str,
        compiled: CompiledAggregate,
        sink: Source,
        custom_types: Mapping[str, Any],
        buffering: bool = False,
    ) -> None:
        self.query_id = query_id
        self.compiled = compiled
        self.sink = sink
        self.buffering = buffering
        self.table_source = compiled.source.kind is SourceKind.TABLE
        self._reader = RowReader(compiled.source, custom_types)
        self.source_serde = self._reader.serde
        self._sink_serde = self.sink_serde = RowSerde.for_source(sink, custom_types)
        self._sink_time = None if sink.timestamp_column is None else timestamp_reader(sink)
        self._key_names = [c.name for c in compiled.key_columns]
        self._session = compiled.window is not None and compiled.window.session
        self._value_names = [c.name for c in compiled.value_columns]
        self._sink_partition = PartitionMemo(sink.partitions)
        # the aggregated row's names (`_update`), made once
        self._group_names = [group_name(i) for i in range(len(compiled.group_keys))]
        self._agg_names = [agg_name(i) for i in range(len(compiled.calls))]
        self._results = [call.udaf.result for call in compiled.calls]
        self._initials = tuple(call.udaf.initial for call in compiled.calls)
        self._task_partition = PartitionMemo(compiled.source.partitions)

    @classmethod
    def for_query(
        cls, query: Query, catalog: Catalog, buffering: bool = False
    ) -> AggregatePipeline:
        """The pipeline of a query the catalog holds (its sink exists there)."""
        select, sink_name = parse_persistent(query.statement_text)
        sink = catalog.source(sink_name)
        if sink is None:
            raise EngineError(f"query {query.id}: its sink {sink_name} is not in the catalog")
        return cls(
            query.id,
            compile_aggregate(select, catalog, sink_name),
            sink,
            dict(catalog.types),
            buffering,
        )

    # -- stage 1 ---------------------------------------------------------------------------------

    def group(
        self, records: Iterable[InputRecord], running: dict[int, int] | None = None
    ) -> tuple[list[GroupedRow | TableChange], list[ProcessingError]]:
        """Stage 1: each record's grouped row (a `TableChange` for a TABLE source).

        ``running``: each partition's highest timestamp so far in the micro-batch, kept by the
        caller when one batch's records come in several calls (see `rank_records`)."""
        return self.group_ranked(rank_records(records, {} if running is None else running))

    def group_ranked(
        self, ranked: Iterable[tuple[int, InputRecord]]
    ) -> tuple[list[GroupedRow | TableChange], list[ProcessingError]]:
        """`group` of records already ranked (`rank_records`)."""
        out: list[GroupedRow | TableChange] = []
        errors: list[ProcessingError] = []
        for rank, record in ranked:
            self.group_record(record, rank, out, errors)
        return out, errors

    def group_record(
        self,
        record: InputRecord,
        rank: int,
        out: list[GroupedRow | TableChange],
        errors: list[ProcessingError],
    ) -> None:
        """One record's grouped row (or table change) onto ``out``, or its error onto ``errors``."""
        try:
            row = self._group_one(record, rank)
            self._drain(errors, record)
        except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
            self._skip(errors, exc, record)
            if self.table_source and record.key is not None:
                # the row can no longer be read: for the table, the key's row is gone
                out.append(
                    TableChange(
                        record.key, None, record.timestamp, record.partition, record.offset, rank
                    )
                )
            return
        if self.table_source:
            if record.key is None:
                return  # a table's record without a key: ksqlDB drops it
            out.append(
                TableChange(
                    record.key, row, record.timestamp, record.partition, record.offset, rank
                )
            )
        elif row is not None:
            out.append(row)

    def _group_one(self, record: InputRecord, rank: int) -> GroupedRow | None:
        compiled = self.compiled
        try:
            value = self._reader.value(record)
        except Exception as exc:  # the record's fault, reported as such
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
                    raise RecordError(
                        "serialization",
                        f"Group-by column with index {index} "
                        "resolved to null. The source row will be excluded from "
                        "the table.",
                    )
            args = tuple(tuple(f(view) for f in call.args) for call in compiled.calls)
            group = self.serialize_group(keys)
        except RecordError:
            raise
        except Exception as exc:  # the record's fault, reported as such
            raise RecordError("serialization", _message(exc)) from exc
        assert group is not None
        return GroupedRow(
            group,
            keys,
            args,
            None,
            int(view["ROWTIME"]),
            record.partition,
            record.offset,
            0,
            record.key,
            rank,
        )

    def serialize_group(self, keys: Sequence[Any]) -> bytes | None:
        """A group's identity: its grouping values as the sink's record key."""
        return self._sink_serde.serialize_key(list(keys))

    # -- stage 2 (TABLE sources) ------------------------------------------------------------------

    def change(self, previous: GroupedRow | None, change: TableChange) -> list[GroupedRow]:
        """Stage 2: the rows a table record sends to its groups, given the key's previous row
        (the caller keeps ``change.row`` as the key's row from then on)."""
        new = change.row
        ts, partition, offset, rank = (
            change.timestamp,
            change.partition,
            change.offset,
            change.rank,
        )
        if previous is not None and new is not None and previous.group == new.group:
            return [
                GroupedRow(
                    new.group, new.keys, new.add, previous.add, ts, partition, offset, 0, rank=rank
                )
            ]
        rows = []
        if previous is not None:
            rows.append(
                GroupedRow(
                    previous.group,
                    previous.keys,
                    None,
                    previous.add,
                    ts,
                    partition,
                    offset,
                    0,
                    rank=rank,
                )
            )
        if new is not None:
            rows.append(
                GroupedRow(
                    new.group,
                    new.keys,
                    new.add,
                    None,
                    new.timestamp,
                    partition,
                    offset,
                    1,
                    rank=rank,
                )
            )
        return rows

    # -- stage 1b: combining before the shuffle ------------------------------------------------------

    @property
    def combines(self) -> bool:
        """Whether stage 1 may combine a batch's rows per group before the shuffle: with
        buffering (one update per group per batch, so per-row results are not needed), over a
        stream, unwindowed (windows need each record's time for stream time and lateness), and
        only built-in functions (a Python function's ``merge`` is ksqlDB's, for sessions: its
        ``initialize`` may hold what two partial states must not both count)."""
        return (
            self.buffering
            and not self.table_source
            and self.compiled.window is None
            and not any(
                isinstance(getattr(c.udaf.add, "__self__", None), user_index.UserAggregate)
                for c in self.compiled.calls
            )
        )

    def combined(self, items: list[GroupedRow | TableChange]) -> list[GroupedRow | TableChange]:
        """A chunk's grouped rows as a source task hands them on: combined per group (`combine`)
        where the pipeline combines and that halves them (`worth_combining`), else as they are."""
        if not self.combines:
            return items
        rows = [i for i in items if isinstance(i, GroupedRow)]
        return list(self.combine(rows)) if self.worth_combining(rows) else items

    @staticmethod
    def worth_combining(rows: Sequence[GroupedRow]) -> bool:
        """Whether `combine` would shuffle at most half as many rows: when most of a chunk's
        groups have one row each (a count over as many keys as records), combining only costs, and
        the rows travel as they are (the aggregate stage applies rows and partials alike)."""
        return halves([row.group for row in rows])

    def combine(self, rows: Sequence[GroupedRow]) -> list[GroupedRow]:
        """One row per group: the partial aggregates of its rows (in batch order), to be merged
        into the group's state (`aggregate`). Shuffles one row per group and task, not per record."""
        calls = self.compiled.calls
        combined: dict[bytes, tuple[GroupedRow, list[Any], int]] = {}
        for row in sorted(rows, key=GroupedRow.order):
            assert row.add is not None
            found = combined.get(row.group)
            partial = found[1] if found is not None else [c.udaf.initial() for c in calls]
            order = row.order()
            for i, call in enumerate(calls):
                partial[i] = call.udaf.add(partial[i], row.add[i], order)
            newest = max(found[2], row.timestamp) if found is not None else row.timestamp
            combined[row.group] = (row, partial, newest)
        return [
            GroupedRow(
                last.group,
                last.keys,
                None,
                last.undo,
                newest,
                last.partition,
                last.offset,
                last.seq,
                last.source_key,
                last.rank,
                partial,
            )
            for last, partial, newest in combined.values()
        ]

    # -- stage 3 ---------------------------------------------------------------------------------

    def initial_state(self) -> GroupState:
        """A new group's state."""
        return GroupState([initial() for initial in self._initials])

    def aggregate(
        self, state: GroupState | None, rows: Sequence[GroupedRow]
    ) -> tuple[GroupState, list[OutputRecord], list[ProcessingError]]:
        """Stage 3: one group's rows (any order: they are sorted by input position) applied to
        its state; the updates to write (one per row, or the last one with buffering).

        A row whose update raises is skipped and reported (an aggregate function that failed half
        way keeps what it had added: functions are not undone), and the group goes on."""
        if state is None:
            state = self.initial_state()
        out: list[OutputRecord] = []
        errors: list[ProcessingError] = []
        ordered = sorted(rows, key=GroupedRow.order)
        for row in ordered:
            if not self.apply(state, row, errors):
                continue
            if self.buffering and row is not ordered[-1]:
                continue  # with buffering, only the batch's last update of a group is written
            record = self.write(state, row, errors)
            if record is not None:
                out.append(record)
        return state, out, errors

    def apply(self, state: GroupState, row: GroupedRow, errors: list[ProcessingError]) -> bool:
        """A grouped row applied to its group's state; False when that raised (the row is
        skipped and reported onto ``errors``: a function that failed half way keeps what it had
        added)."""
        try:
            self._apply(state, row)
        except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
            self._skip(errors, exc, row)
            return False
        self._drain(errors, row)
        return True

    def write(
        self, state: GroupState, row: GroupedRow, errors: list[ProcessingError]
    ) -> OutputRecord | None:
        """The update a group's state writes at ``row``'s place (`_update`), or None: it does not
        pass HAVING, or writing it raised (the row is skipped and reported onto ``errors``)."""
        try:
            record = self._update(state, row)
        except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
            self._skip(errors, exc, row)
            return None
        self._drain(errors, row)
        return record

    def _skip(
        self, errors: list[ProcessingError], exc: Exception, at: GroupedRow | InputRecord
    ) -> None:
        """A record the stage skips: what its Python functions raised before it failed, then
        its own error (`skipped`)."""
        self._drain(errors, at)
        errors.append(
            skipped(
                self.query_id,
                exc,
                "processing",
                self.compiled.source.topic,
                at.partition,
                at.offset,
            )
        )

    def _drain(self, errors: list[ProcessingError], at: GroupedRow | InputRecord) -> None:
        """The processing-log entries of the Python functions that raised on one record."""
        if user_index.failures_pending():
            errors.extend(
                function_failures(
                    self.query_id, self.compiled.source.topic, at.partition, at.offset
                )
            )

    def _apply(self, state: GroupState, row: GroupedRow) -> None:
        """A grouped row's values added to (or taken from) its group's aggregates."""
        aggregates, calls = state.aggregates, self.compiled.calls
        if row.undo is not None:
            for i, call in enumerate(calls):
                undo = call.udaf.undo
                assert undo is not None  # compile refuses such functions over tables
                aggregates[i] = undo(aggregates[i], row.undo[i])
        if row.add is not None:
            order = ROW_ORDER(row)
            for i, call in enumerate(calls):
                aggregates[i] = call.udaf.add(aggregates[i], row.add[i], order)
        if row.partial is not None:
            for i, call in enumerate(calls):
                aggregates[i] = call.udaf.merge(aggregates[i], row.partial[i])
        state.timestamp = max(state.timestamp, row.timestamp)

    def _update(
        self,
        state: GroupState,
        row: GroupedRow,
        window: tuple[int, int] | None = None,
        seq: int | None = None,
        timestamp: int | None = None,
    ) -> OutputRecord | None:
        """The record a group's (or a group window's) new state writes: its row, a tombstone
        when it stops passing HAVING, or None."""
        compiled = self.compiled
        view: dict[str, Any] = dict(zip(self._group_names, row.keys))
        for name, result, a in zip(self._agg_names, self._results, state.aggregates, strict=True):
            view[name] = result(a)
        key = row.group
        if window is not None:
            view["WINDOWSTART"], view["WINDOWEND"] = window
            key = windowed_key(row.group, window, self._session)
        passes = compiled.having is None or compiled.having(view) is True
        timestamp = state.timestamp if timestamp is None else timestamp
        seq = row.seq if seq is None else seq
        if not passes:
            if not state.passed:
                return None
            state.passed = False
            return OutputRecord(
                key,
                None,
                timestamp,
                self._partition(row.group),
                row.partition,
                row.offset,
                seq,
                row.rank,
            )
        try:
            values = {name: f(view) for name, f in zip(self._value_names, compiled.values)}
            value_bytes = self._sink_serde.serialize_value(values)
        except Exception as exc:  # the record's fault, reported as such
            raise RecordError("serialization", _message(exc)) from exc
        if self._sink_time is not None:
            values.update(zip(self._key_names, row.keys))
            try:
                timestamp = self._sink_time(values)
            except Exception as exc:  # the record's fault, reported as such
                raise RecordError("timestamp", _message(exc)) from exc
        state.passed = True
        return OutputRecord(
            key,
            value_bytes,
            timestamp,
            self._partition(row.group),
            row.partition,
            row.offset,
            seq,
            row.rank,
        )

    # -- stage 3, windowed ------------------------------------------------------------------------

    def task_of(self, group: bytes) -> int:
        """The task a group belongs to: its partition of ksqlDB's re-partition topic (as many
        partitions as the source). Stream time, late records and window closing are per task."""
        return self._task_partition(group)

    def aggregate_windowed(
        self, task: WindowedTask, rows: Sequence[GroupedRow]
    ) -> tuple[list[OutputRecord], list[ProcessingError]]:
        """Stage 3 of a windowed aggregation: one task's rows, in input order, into their
        windows. Stream time is the task's highest timestamp so far (the record's own included); a
        window whose end plus grace is at or before it is closed: its late records are dropped, its
        state released (and, with EMIT FINAL, its one result written).

        With buffering, a time window's updates are written once per call, the last one, at the
        place of the record that made it, as `aggregate` writes a group's (ksqlDB's record cache
        holds windowed keys alike); session windows, whose merges delete sessions, and EMIT
        FINAL write as they go."""
        window = self.compiled.window
        assert window is not None
        out: list[OutputRecord] = []
        errors: list[ProcessingError] = []
        #: with buffering: each time window changed, its state and the row that last changed it,
        #: in the order of those last changes
        pending: dict[tuple[bytes, tuple[int, int]], tuple[GroupState, GroupedRow]] | None = (
            {} if self.buffering and not window.session and not self.compiled.emit_final else None
        )
        for row in sorted(rows, key=GroupedRow.order):
            task.state.stream_time = max(task.state.stream_time, row.timestamp)
            produced: list[OutputRecord] = []
            try:
                if window.session:
                    produced.extend(self._session_row(task, row))
                else:
                    produced.extend(self._time_windows_row(task, row, pending))
                self._drain(errors, row)
            except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
                self._skip(errors, exc, row)
            produced.extend(self._close(task, row))
            # one input record's outputs, numbered in the order they were made
            out.extend(
                o if o.source_seq == i else replace(o, source_seq=i) for i, o in enumerate(produced)
            )
        if pending:
            out.extend(self._buffered(pending, errors))
        return out, errors

    def _buffered(
        self,
        pending: Mapping[tuple[bytes, tuple[int, int]], tuple[GroupState, GroupedRow]],
        errors: list[ProcessingError],
    ) -> list[OutputRecord]:
        """The records of a call's last update of each time window, each numbered among the
        updates its record made last."""
        out: list[OutputRecord] = []
        made: dict[int, int] = {}  # id of a row -> its records so far
        for (_group, bounds), (state, row) in pending.items():
            seq = made.get(id(row), 0)
            try:
                record = self._update(state, row, bounds, seq=seq)
                self._drain(errors, row)
            except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
                self._skip(errors, exc, row)
                continue
            if record is not None:
                made[id(row)] = seq + 1
                out.append(record)
        return out

    def _time_windows_row(
        self,
        task: WindowedTask,
        row: GroupedRow,
        pending: dict[tuple[bytes, tuple[int, int]], tuple[GroupState, GroupedRow]] | None = None,
    ) -> list[OutputRecord]:
        window = self.compiled.window
        assert window is not None and row.add is not None
        out: list[OutputRecord] = []
        windows = task.windows(row.group)
        for bounds in window.windows_for(row.timestamp):
            if bounds[1] + window.grace_ms <= task.state.stream_time:
                continue  # the window is closed: a late record, dropped as Kafka Streams does
            state = windows.get(bounds)
            if state is None:
                state = windows[bounds] = self.initial_state()
                task.closes(bounds[0], row.group)
            task.state.store_time = max(task.state.store_time, bounds[0])
            order = row.order()
            for i, call in enumerate(self.compiled.calls):
                state.aggregates[i] = call.udaf.add(state.aggregates[i], row.add[i], order)
            state.timestamp = max(state.timestamp, row.timestamp)
            task.touch(row.group, row.keys)
            if pending is not None:  # written once, after the call's rows (`_buffered`)
                key = (row.group, bounds)
                pending.pop(key, None)
                pending[key] = (state, row)
            elif not self.compiled.emit_final:
                record = self._update(state, row, bounds, seq=len(out))
                if record is not None:
                    out.append(record)
        return out

    def _session_row(self, task: WindowedTask, row: GroupedRow) -> list[OutputRecord]:
        window = self.compiled.window
        assert window is not None and row.add is not None
        gap, ts = window.size_ms, row.timestamp
        sessions = task.windows(row.group)
        # the session store keeps sessions ending no earlier than its newest end less retention
        visible = task.state.store_time - (window.retention_ms or gap + window.grace_ms)
        overlapping = sorted(
            b for b in sessions if b[1] >= max(ts - gap, visible) and b[0] <= ts + gap
        )
        merged = (min([ts, *(b[0] for b in overlapping)]), max([ts, *(b[1] for b in overlapping)]))
        if merged[1] < task.state.stream_time - window.grace_ms - gap:
            return []  # expired: a late record, dropped
        out: list[OutputRecord] = []
        state = self.initial_state()
        for bounds in overlapping:
            old = sessions[bounds]
            state.aggregates = [
                call.udaf.merge(a, b)
                for call, a, b in zip(self.compiled.calls, state.aggregates, old.aggregates)
            ]
            state.passed = state.passed or old.passed
        if merged != (ts, ts):
            for bounds in overlapping:
                old = sessions.pop(bounds)
                if old.passed and not self.compiled.emit_final:
                    out.append(
                        OutputRecord(
                            windowed_key(row.group, bounds, True),
                            None,
                            bounds[1],
                            self._partition(row.group),
                            row.partition,
                            row.offset,
                            len(out),
                            row.rank,
                        )
                    )
                state.passed = False
        order = row.order()
        for i, call in enumerate(self.compiled.calls):
            state.aggregates[i] = call.udaf.add(state.aggregates[i], row.add[i], order)
        state.timestamp = merged[1]
        sessions[merged] = state
        task.state.store_time = max(task.state.store_time, merged[1])
        task.touch(row.group, row.keys)
        task.closes(merged[1], row.group)
        if not self.compiled.emit_final:
            record = self._update(state, row, merged, seq=len(out), timestamp=merged[1])
            if record is not None:
                out.append(record)
        return out

    def _close(self, task: WindowedTask, row: GroupedRow) -> list[OutputRecord]:
        """After each record: with EMIT FINAL, the windows that closed since the last emission
        (Kafka Streams' emit-on-window-close, whose rules and quirks ksqlDB's results carry);
        then the windows no record can change any more are released."""
        window = self.compiled.window
        assert window is not None
        state = task.state
        out: list[OutputRecord] = []
        if window.session:
            close = state.stream_time - window.grace_ms - window.size_ms
            if self.compiled.emit_final and (state.last_emit == -1 or state.last_emit < close):
                upper, lower = close - 1, max(0, state.last_emit)
                if upper >= 0 and upper >= lower:
                    for end in sorted(e for e in state.closing if lower <= e <= upper):
                        for group in sorted(set(state.closing[end])):
                            out.extend(self._final(task, group, end, row, by_end=True))
                    state.last_emit = close
            # sessions the store no longer keeps (they can no longer merge with a record)
            expired = state.store_time - (window.retention_ms or window.size_ms + window.grace_ms)
        else:
            retention = window.retention_ms or window.size_ms + window.grace_ms
            oldest = state.store_time - retention  # the window store keeps starts >= this
            close = state.stream_time - window.grace_ms
            if self.compiled.emit_final and (state.last_emit == -1 or state.last_emit < close):
                upper = close - window.size_ms
                lower = -1 if state.last_emit == -1 else state.last_emit - window.size_ms
                if upper >= 0 and (
                    state.last_emit == -1 or window.windows_for(upper) != window.windows_for(lower)
                ):
                    first = max(lower + 1, oldest)
                    for start in sorted(t for t in state.closing if first <= t <= upper):
                        for group in sorted(set(state.closing[start])):
                            out.extend(self._final(task, group, start, row, by_end=False))
                    state.last_emit = close
            expired = oldest
        for bound in sorted(t for t in state.closing if t < expired):
            for group in set(state.closing.pop(bound)):
                windows = task.windows(group)
                for bounds in [b for b in windows if b[1 if window.session else 0] == bound]:
                    del windows[bounds]
                task.touch(group, task.keys_of(group))
        return out

    def _final(
        self, task: WindowedTask, group: bytes, bound: int, row: GroupedRow, by_end: bool
    ) -> list[OutputRecord]:
        """EMIT FINAL's record of the group's window starting (or, a session, ending) at bound."""
        out: list[OutputRecord] = []
        for bounds, state in sorted(task.windows(group).items()):
            if bounds[1 if by_end else 0] != bound:
                continue
            record = self._update(
                state,
                GroupedRow(
                    group,
                    task.keys_of(group),
                    None,
                    None,
                    state.timestamp,
                    row.partition,
                    row.offset,
                    rank=row.rank,
                ),
                bounds,
                timestamp=bounds[1] if by_end else None,
            )
            if record is not None:
                out.append(record)
        return out

    def _partition(self, key: bytes) -> int:
        return self._sink_partition(key)

    def _error(self, kind: str, message: str, record: InputRecord) -> ProcessingError:
        return ProcessingError(
            self.query_id,
            kind,
            message,
            self.compiled.source.topic,
            record.partition,
            record.offset,
        )


class LocalAggregation:
    """The stages run in one process over keyed state held in dicts (pickled between batches, as
    Spark's state store holds them): the conformance runner's and the tests' way to run an
    aggregating query (Spark runs the same stages)."""

    def __init__(self, pipeline: AggregatePipeline) -> None:
        self.pipeline = pipeline
        self.compiled = pipeline.compiled
        self.sink = pipeline.sink
        self._rows: dict[bytes, GroupedRow | None] = {}
        self._groups: dict[bytes, bytes] = {}
        self._tasks: dict[int, bytes] = {}

    def process(
        self, records: Iterable[InputRecord]
    ) -> tuple[list[OutputRecord], list[ProcessingError]]:
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
        out: list[OutputRecord] = []
        if self.pipeline.combines:
            rows = self.pipeline.combine(rows)
        if self.compiled.window is not None:
            by_task: dict[int, list[GroupedRow]] = {}
            for row in rows:
                by_task.setdefault(self.pipeline.task_of(row.group), []).append(row)
            for task_id, members in by_task.items():
                stored = self._tasks.get(task_id)
                task = WindowedTask(
                    pickle.loads(stored) if stored else TaskState(),
                    lambda g: pickle.loads(self._groups[g]) if g in self._groups else None,
                )
                records_out, more_errors = self.pipeline.aggregate_windowed(task, members)
                self._tasks[task_id] = pickle.dumps(task.state)
                for group, windows in task.changed.items():
                    if windows is None:
                        self._groups.pop(group, None)
                    else:
                        self._groups[group] = pickle.dumps(windows)
                errors.extend(more_errors)
                out.extend(records_out)
        else:
            by_group: dict[bytes, list[GroupedRow]] = {}
            for row in rows:
                by_group.setdefault(row.group, []).append(row)
            for group, members in by_group.items():
                stored = self._groups.get(group)
                state, records_out, more_errors = self.pipeline.aggregate(
                    pickle.loads(stored) if stored else None, members
                )
                self._groups[group] = pickle.dumps(state)
                errors.extend(more_errors)
                out.extend(records_out)
        out.sort(key=OutputRecord.order)
        return out, errors
