"""A persistent query's joins, record by record, with Kafka Streams' semantics as ksqlDB uses them. Pure.

Two stages, as Spark chains them (`headwater.engine.spark.joins`) and the conformance runner calls
them:

1. **enter** (per source partition): decode a source record, name its columns ``ALIAS_COLUMN``,
   compute its join key (the ON expression of its side) and its task: the partition it is joined
   in (its own, or, for a re-keyed side, the partition of its new key, as ksqlDB's repartition
   topic gives). Records whose join key is NULL are dropped, as ksqlDB drops them.
2. **join** (per task, records in order): the binary steps of `join_plan.JoinPlan`, each keeping
   its state per join key: a table side's current row; a stream side's records within the join
   window (stream-stream). The rules are Kafka Streams':

   - stream-table: a stream record looks the key up in the table; INNER emits only on a match,
     LEFT with NULLs otherwise; table records only update the table. Timestamp: the stream's.
   - table-table: an update of either side emits the joined row when the join type keeps it
     (INNER: both present; LEFT: the left present; RIGHT: the right; FULL: either); a deletion
     emits a tombstone, or for outer joins the row of the side left. Timestamp: the larger.
   - stream-stream: a record joins the other side's records of the same key within ``WITHIN
     (before, after)``, each match emitted at the larger timestamp; window stores expire by
     segment after before + after + grace of stream time. LEFT/RIGHT/FULL records without a match
     are emitted with NULLs at once without GRACE PERIOD (ksqlDB's old windows), and with it only
     once their window has closed (stream time past their time + window + grace), in time order.
   - foreign-key table-table: the left table's rows are joined to the right row their foreign key
     names; an update of a right row re-emits every left row pointing at it.

   A step's output is the next step's left input; the root's output goes on to the query's own
   operators (`RecordPipeline` or `AggregatePipeline` over the joined source) as records whose
   row is already decoded.

States are plain data (pickled by Spark's state store between batches); a batch's output is
deterministic given its input order, so a replayed batch writes the same records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from headwater.engine.formats.serde import RowSerde
from headwater.engine.functions import user_index
from headwater.engine.partitioner import partition_for
from headwater.engine.persistent.join_plan import (
    DEFAULT_GRACE_MS,
    JoinLeaf,
    JoinPlan,
    JoinStep,
    key_formats,
)
from headwater.engine.persistent.query_run import (
    OLD_ROW,
    InputRecord,
    ProcessingError,
    RowReader,
    function_failures,
    skipped,
)
from headwater.metastore.catalog import Column, Source, SourceKind

_LEFT, _RIGHT = 0, 1


class SideRecord(NamedTuple):
    """A record on its way into a join step (a named tuple, as `InputRecord`: one is made per
    record entering the join and pickled to its task, and a frozen dataclass cost 1.2 us to make,
    2.4 us to pickle and 2.8 us to unpickle, a tuple 0.3, 1.1 and 0.6).

    Attributes:
        leaf: the source it came from (-1: the output of the step before).
        key: the join key; ``key_bytes`` its identity in the states.
        row: the joined columns (``ALIAS_COLUMN``); None: a table's deletion of ``key``.
        rank: its place in the batch (orders the outputs).
    """

    leaf: int
    task: int
    key: Any
    key_bytes: bytes
    row: Mapping[str, Any] | None
    timestamp: int
    partition: int
    offset: int
    source_key: bytes | None = None  # a table leaf's own key (foreign-key joins)


@dataclass
class StepState:
    """A step's state for one task: stream time and the outer records still waiting."""

    stream_time: int = -1
    min_time: int = 2**63 - 1
    observed: list[int] = field(default_factory=lambda: [-1, -1])
    outer: dict[tuple[int, int, bytes], tuple[Any, Mapping[str, Any], int, int]] = field(
        default_factory=dict
    )


@dataclass
class KeyState:
    """A step's state for one join key: table rows, window records."""

    rows: list[tuple[int, Mapping[str, Any]] | None] = field(default_factory=lambda: [None, None])
    windows: list[list[tuple[int, Mapping[str, Any]]]] = field(default_factory=lambda: [[], []])
    pointed: set[bytes] = field(default_factory=set)  # foreign key: left keys pointing here

    def empty(self) -> bool:
        return (
            self.rows == [None, None]
            and not self.windows[0]
            and not self.windows[1]
            and not self.pointed
        )


@dataclass
class TaskState:
    """What a task keeps besides its keys' states."""

    steps: dict[int, StepState] = field(default_factory=dict)
    emitted: int = 0  # joined records so far (numbers them, so a replayed batch numbers alike)


class JoinTask:
    """One task's states: its `TaskState` and its keys' states, loaded on demand through ``load``
    (Spark's map state, or a dict) and collected in ``changed`` for the caller to store."""

    def __init__(
        self, state: TaskState, load: Callable[[tuple[int, str, bytes]], KeyState | None]
    ) -> None:
        self.state = state
        self._load = load
        self._loaded: dict[tuple[int, str, bytes], KeyState] = {}
        self._stored: set[tuple[int, str, bytes]] = set()  # those the store had
        self.changed: dict[tuple[int, str, bytes], KeyState | None] = {}

    def step(self, index: int) -> StepState:
        return self.state.steps.setdefault(index, StepState())

    def key(self, step: int, space: str, key: bytes, write: bool = True) -> KeyState:
        """A key's state; ``write=False`` for a look-up that changes nothing (not stored back)."""
        ident = (step, space, key)
        found = self._loaded.get(ident)
        if found is None:
            stored = self._load(ident)
            if stored is not None:
                self._stored.add(ident)
            found = self._loaded[ident] = stored or KeyState()
        if write:
            self.changed[ident] = found
        return found

    def done(self) -> None:
        """Marks emptied key states for deletion (and forgets those that never were stored)."""
        for ident, found in list(self.changed.items()):
            if found is not None and found.empty():
                if ident in self._stored:
                    self.changed[ident] = None
                else:
                    del self.changed[ident]


@dataclass(frozen=True, slots=True)
class _Out:
    key: Any
    key_bytes: bytes
    row: Mapping[str, Any] | None
    timestamp: int
    old: Mapping[str, Any] | None = None  # a table join's previous row for the key (old value)


class JoinPipeline:
    """The join stages of one query (see the module docstring)."""

    def __init__(self, query_id: str, plan: JoinPlan, custom_types: Mapping[str, Any]) -> None:
        self.query_id = query_id
        self.plan = plan
        self._readers = [RowReader(leaf.source, custom_types) for leaf in plan.leaves]
        self._entry = {}  # leaf -> (step, side)
        for step in plan.steps:
            if isinstance(step.left, JoinLeaf):
                self._entry[step.left.index] = (step, _LEFT)
            self._entry[step.right.index] = (step, _RIGHT)
        formats = key_formats(plan.steps[-1])
        self._key_serdes: dict[int, RowSerde] = {}
        for step in plan.steps:
            key_format = formats[step.index]
            holder = Source(
                SourceKind.STREAM,
                "JOINKEY",
                (Column("K", step.key_type.sql(), True), Column("V", "INTEGER")),
                topic="",
                partitions=1,
                key_format=key_format if key_format in ("KAFKA", "JSON", "DELIMITED") else "JSON",
            )
            self._key_serdes[step.index] = RowSerde.for_source(holder, custom_types)
        self._nulls = {
            step.index: (
                {p: None for p, _t in _side_columns(step.left)},
                {p: None for _c, p, _t in step.right.columns},
            )
            for step in plan.steps
        }
        self._parent = {step.index: plan.steps[step.index + 1] for step in plan.steps[:-1]}
        self.topics = {leaf.source.topic: leaf.index for leaf in plan.leaves}

    @property
    def leaves(self) -> tuple[JoinLeaf, ...]:
        return self.plan.leaves

    # -- stage 1 -------------------------------------------------------------------------------------

    def enter(
        self, leaf_index: int, records: Iterable[InputRecord]
    ) -> tuple[list[SideRecord], list[ProcessingError]]:
        """Stage 1 over one leaf's records: what enters the join, and the records skipped."""
        leaf = self.plan.leaves[leaf_index]
        reader = self._readers[leaf_index]
        step, side = self._entry[leaf_index]
        rekey = step.left_rekey if side == _LEFT else step.right_rekey
        evaluate = step.left_key if side == _LEFT else step.right_key
        fk_left = step.foreign_key and side == _LEFT
        out: list[SideRecord] = []
        errors: list[ProcessingError] = []
        table = leaf.kind is SourceKind.TABLE
        for record in records:
            if record.key is None and table:
                continue  # a table's record without a key: dropped
            try:
                value = reader.value(record)
                view = reader.view(record, value)
            except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
                errors.append(
                    skipped(
                        self.query_id,
                        exc,
                        "deserialization",
                        leaf.source.topic,
                        record.partition,
                        record.offset,
                    )
                )
                continue
            row = None if value is None else {p: view.get(c) for c, p, _t in leaf.columns}
            if row is None and not table:
                continue  # a stream record without a value: nothing to join
            try:
                if fk_left:
                    key = None if row is None else evaluate(row)
                elif row is None:
                    key = self._table_key(leaf, view)
                else:
                    key = evaluate(row)
            except Exception:  # noqa: BLE001 - a join key that fails is NULL, as in ksqlDB
                key = None
            if user_index.failures_pending():  # a Python function in the join key raised
                errors.extend(
                    function_failures(
                        self.query_id, leaf.source.topic, record.partition, record.offset
                    )
                )
            if key is None and not (fk_left and table):
                continue  # ksqlDB drops records whose join key is NULL
            key_bytes = self._key_bytes(step, key)
            if _pinned(step):
                # foreign-key joins are not co-partitioned: one task sees both tables, and the
                # joins after one (its result is made in that task) meet their other side there
                task = 0
            elif rekey:
                task = partition_for(key_bytes, self.plan.partitions)
            else:
                task = record.partition
            out.append(
                SideRecord(
                    leaf_index,
                    task,
                    key,
                    key_bytes,
                    row,
                    int(view["ROWTIME"]),
                    record.partition,
                    record.offset,
                    record.key if table else None,
                )
            )
        return out, errors

    def _table_key(self, leaf: JoinLeaf, view: Mapping[str, Any]) -> Any:
        keys = leaf.source.key_columns
        return view.get(keys[0].name) if len(keys) == 1 else None

    def _key_bytes(self, step: JoinStep, key: Any) -> bytes:
        if key is None:
            return b""
        try:
            found = self._key_serdes[step.index].serialize_key([key])
        except Exception:  # noqa: BLE001 - only routes the record: any stable bytes do
            found = None
        return found if found is not None else repr(key).encode()

    # -- stage 2 -------------------------------------------------------------------------------------

    def join(
        self, task: JoinTask, records: Sequence[SideRecord], task_id: int = 0, first_offset: int = 0
    ) -> list[InputRecord]:
        """Stage 2: the joined records of one task's records (in the order given), as records of
        the joined source whose rows are decoded; ``offset`` numbers them from ``first_offset``."""
        joined: list[InputRecord] = []
        for record in records:
            step, side = self._entry[record.leaf]
            outs = self._step(task, step, side, record)
            while outs and step.index in self._parent:
                parent = self._parent[step.index]
                outs = [
                    o2
                    for o in outs
                    for o2 in self._step(
                        task, parent, _LEFT, self._as_left(parent, o, record, step)
                    )
                ]
                step = parent
            for o in outs:
                joined.append(self._record(o, task_id, first_offset + len(joined)))
        task.done()
        return joined

    def _as_left(
        self, parent: JoinStep, out: _Out, origin: SideRecord, child: JoinStep
    ) -> SideRecord:
        key, key_bytes = out.key, out.key_bytes
        if child.foreign_key and not parent.left_rekey:
            # a foreign-key join's result is keyed by its left table's primary key
            keys = out.key if isinstance(out.key, dict) else self._fk_keys(child, out.row or {})
            key = next(iter(keys.values())) if len(keys) == 1 else None
            key_bytes = self._key_bytes(parent, key)
        if parent.left_rekey and out.row is not None:
            try:
                key = parent.left_key(out.row)
            except Exception:  # noqa: BLE001 - a join key that fails is NULL, as in ksqlDB
                key = None
            user_index.take_failures()  # an n-way join's inner key: NULL, not logged (gap)
            key_bytes = self._key_bytes(parent, key)
        return SideRecord(
            -1, origin.task, key, key_bytes, out.row, out.timestamp, origin.partition, origin.offset
        )

    def _record(self, out: _Out, task_id: int, offset: int) -> InputRecord:
        view = self._view(out.row, out.key, out.timestamp, task_id, offset)
        if self.plan.root.result is SourceKind.TABLE:
            view[OLD_ROW] = (
                None
                if out.old is None
                else self._view(out.old, out.key, out.timestamp, task_id, offset)
            )
        return InputRecord(
            out.key_bytes or None,
            None if out.row is None else b"",
            out.timestamp,
            task_id,
            offset,
            (),
            view,
        )

    def _view(
        self, row: Mapping[str, Any] | None, key: Any, timestamp: int, task_id: int, offset: int
    ) -> dict[str, Any]:
        root = self.plan.root
        view: dict[str, Any] = dict(row) if row is not None else {}
        if row is None:
            view.update(self._nulls[root.index][0])
            view.update(self._nulls[root.index][1])
        if root.key_name:
            view[root.key_name] = key
        elif isinstance(key, dict):  # a foreign-key join's tombstone: the left table's key
            view.update(key)
        view["ROWTIME"] = timestamp
        view["ROWPARTITION"] = task_id
        view["ROWOFFSET"] = offset
        return view

    def _step(self, task: JoinTask, step: JoinStep, side: int, record: SideRecord) -> list[_Out]:
        if record.key is None and not step.foreign_key:
            return []
        kinds = step.kind_of
        if step.foreign_key:
            return self._foreign_key(task, step, side, record)
        if kinds == "ST":
            return self._stream_table(task, step, side, record)
        if kinds == "TT":
            return self._table_table(task, step, side, record)
        return self._stream_stream(task, step, side, record)

    def _joined(
        self, step: JoinStep, left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        nulls = self._nulls[step.index]
        row = dict(left) if left is not None else dict(nulls[0])
        row.update(right if right is not None else nulls[1])
        return row

    # -- stream-table ----------------------------------------------------------------------------------

    def _stream_table(
        self, task: JoinTask, step: JoinStep, side: int, record: SideRecord
    ) -> list[_Out]:
        state = task.key(step.index, "K", record.key_bytes, write=side == _RIGHT)
        if side == _RIGHT:
            state.rows[_RIGHT] = None if record.row is None else (record.timestamp, record.row)
            return []
        if record.row is None:
            return []
        found = state.rows[_RIGHT]
        if found is None and step.kind == "INNER":
            return []
        right = None if found is None else found[1]
        return [
            _Out(
                record.key,
                record.key_bytes,
                self._joined(step, record.row, right),
                record.timestamp,
            )
        ]

    # -- table-table -----------------------------------------------------------------------------------

    def _table_table(
        self, task: JoinTask, step: JoinStep, side: int, record: SideRecord
    ) -> list[_Out]:
        state = task.key(step.index, "K", record.key_bytes)
        old = state.rows[side]
        state.rows[side] = None if record.row is None else (record.timestamp, record.row)
        other = state.rows[1 - side]
        kind = step.kind
        keeps_this = (
            kind == "FULL"
            or (kind == "LEFT" and side == _LEFT)
            or (kind == "RIGHT" and side == _RIGHT)
        )
        keeps_other = (
            kind == "FULL"
            or (kind == "LEFT" and side == _RIGHT)
            or (kind == "RIGHT" and side == _LEFT)
        )
        timestamp = record.timestamp if other is None else max(record.timestamp, other[0])
        previous = self._table_row(step, side, old, other, keeps_this, keeps_other)
        if other is None:
            if not keeps_this or (record.row is None and old is None):
                return []  # nothing to join with, nothing that was joined
            row = None if record.row is None else self._pair(step, side, record.row, None)
        elif record.row is None:
            # this side is gone: the other side's row alone when the join keeps it, else deleted
            row = self._pair(step, side, None, other[1]) if keeps_other else None
        else:
            row = self._pair(step, side, record.row, other[1])
        return [_Out(record.key, record.key_bytes, row, timestamp, previous)]

    def _table_row(
        self,
        step: JoinStep,
        side: int,
        this: tuple[int, Mapping[str, Any]] | None,
        other: tuple[int, Mapping[str, Any]] | None,
        keeps_this: bool,
        keeps_other: bool,
    ) -> dict[str, Any] | None:
        """The joined row a table join holds for a key given each side's row (None: none)."""
        if this is not None and other is not None:
            return self._pair(step, side, this[1], other[1])
        if this is not None and keeps_this:
            return self._pair(step, side, this[1], None)
        if other is not None and keeps_other:
            return self._pair(step, side, None, other[1])
        return None

    def _pair(
        self,
        step: JoinStep,
        side: int,
        this: Mapping[str, Any] | None,
        other: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        return self._joined(step, this, other) if side == _LEFT else self._joined(step, other, this)

    # -- foreign key -----------------------------------------------------------------------------------

    def _foreign_key(
        self, task: JoinTask, step: JoinStep, side: int, record: SideRecord
    ) -> list[_Out]:
        if side == _LEFT:
            own = record.source_key or b""
            mine = task.key(step.index, "L", own)
            previous = mine.rows[_LEFT]
            old_fk = None if previous is None else previous[1].get("\0fk")
            if old_fk is not None and old_fk != record.key_bytes:
                task.key(step.index, "R", old_fk).pointed.discard(own)
            if record.row is None:
                mine.rows[_LEFT] = None
                if previous is None:
                    return []
                # the left row is gone: a tombstone under its key (when it was joined / kept)
                return [_Out(self._fk_keys(step, previous[1]), own, None, record.timestamp)]
            stored = dict(record.row)
            stored["\0fk"] = record.key_bytes if record.key is not None else None
            mine.rows[_LEFT] = (record.timestamp, stored)
            right = None
            if record.key is not None:
                target = task.key(step.index, "R", record.key_bytes)
                target.pointed.add(own)
                right = target.rows[_RIGHT]
            if right is None and step.kind == "INNER":
                if previous is not None:
                    return [_Out(self._fk_keys(step, previous[1]), own, None, record.timestamp)]
                return []
            timestamp = record.timestamp if right is None else max(record.timestamp, right[0])
            return [
                _Out(
                    None,
                    own,
                    self._joined(step, record.row, None if right is None else right[1]),
                    timestamp,
                )
            ]
        target = task.key(step.index, "R", record.key_bytes)
        target.rows[_RIGHT] = None if record.row is None else (record.timestamp, record.row)
        outs: list[_Out] = []
        for own in sorted(target.pointed):
            left = task.key(step.index, "L", own, write=False).rows[_LEFT]
            if left is None:
                continue
            row = {k: v for k, v in left[1].items() if k != "\0fk"}
            timestamp = max(record.timestamp, left[0])
            if record.row is None and step.kind == "INNER":
                outs.append(_Out(self._fk_keys(step, row), own, None, timestamp))
            else:
                outs.append(_Out(None, own, self._joined(step, row, record.row), timestamp))
        return outs

    def _fk_keys(self, step: JoinStep, row: Mapping[str, Any]) -> dict[str, Any]:
        """The left table's key columns of a row (a foreign-key join's result key)."""
        left = step.left
        assert isinstance(left, JoinLeaf)
        return {
            p: row.get(p)
            for c, p, _t in left.columns
            if (column := left.source.column(c)) is not None and column.key
        }

    # -- stream-stream ---------------------------------------------------------------------------------

    def _stream_stream(
        self, task: JoinTask, step: JoinStep, side: int, record: SideRecord
    ) -> list[_Out]:
        if record.row is None:
            return []
        before, after = step.before_ms or 0, step.after_ms or 0
        fixed = step.grace_ms is not None  # GRACE PERIOD given: Kafka Streams' spurious-result fix
        grace = step.grace_ms if step.grace_ms is not None else DEFAULT_GRACE_MS
        retention = before + after + grace
        timeline = task.step(step.index)
        ts = record.timestamp
        state = task.key(step.index, "K", record.key_bytes)

        def live(t: int, which: int) -> bool:  # Kafka Streams' window stores drop by time
            return t > timeline.observed[which] - retention

        # this side's window store (Kafka Streams' KStreamJoinWindow, before the join itself)
        timeline.observed[side] = max(timeline.observed[side], ts)
        if live(ts, side):
            state.windows[side].append((ts, record.row))
        other = 1 - side
        state.windows[other] = [(t, r) for t, r in state.windows[other] if live(t, other)]
        if side == _LEFT:
            start, end = max(0, ts - before), max(0, ts + after)
            outer = step.kind in ("LEFT", "FULL")
        else:
            start, end = max(0, ts - after), max(0, ts + before)
            outer = step.kind in ("RIGHT", "FULL")
        timeline.stream_time = max(timeline.stream_time, ts)
        outs: list[_Out] = []
        if fixed and ts == timeline.stream_time:
            outs.extend(self._expired(step, timeline, side, before, after, grace))
        matched = False
        for t, row in sorted(state.windows[other], key=lambda e: e[0]):
            if start <= t <= end:
                matched = True
                if fixed:
                    timeline.outer.pop((t, _flag(other), record.key_bytes), None)
                outs.append(
                    _Out(
                        record.key,
                        record.key_bytes,
                        self._pair(step, side, record.row, row),
                        max(ts, t),
                    )
                )
        if not matched and outer:
            if not fixed or end < timeline.stream_time:
                outs.append(
                    _Out(record.key, record.key_bytes, self._pair(step, side, record.row, None), ts)
                )
            else:
                timeline.min_time = min(timeline.min_time, ts)
                timeline.outer[(ts, _flag(side), record.key_bytes)] = (
                    record.key,
                    record.row,
                    side,
                    0,
                )
        state.windows[side] = [(t, r) for t, r in state.windows[side] if live(t, side)]
        return outs

    def _expired(
        self, step: JoinStep, timeline: StepState, side: int, before: int, after: int, grace: int
    ) -> list[_Out]:
        """The outer records whose windows have closed, in time order (then removed)."""
        own_after = after if side == _LEFT else before
        if timeline.min_time + own_after + grace >= timeline.stream_time or not timeline.outer:
            return []
        timeline.min_time = 2**63 - 1
        outs: list[_Out] = []
        left_open = right_open = False
        for ident in sorted(timeline.outer):
            if left_open and right_open:
                break
            t, flag, key_bytes = ident
            timeline.min_time = t
            lookback = after if flag == 1 else before
            if t + lookback + grace >= timeline.stream_time:
                if flag == 1:
                    left_open = True
                else:
                    right_open = True
                continue
            key, row, which, _ = timeline.outer.pop(ident)
            outs.append(_Out(key, key_bytes, self._pair(step, which, row, None), t))
        return outs


def merge_order(records: Sequence[SideRecord], pipeline: JoinPipeline) -> list[SideRecord]:
    """A batch's records in the order Kafka Streams would join them: each source partition's in
    offset order, the next one always from the partition whose head has the smallest timestamp
    (a table's before a stream's on a tie, so a stream record sees the table as of its time)."""
    queues: dict[tuple[int, int], list[SideRecord]] = {}
    for record in sorted(records, key=lambda r: (r.leaf, r.partition, r.offset)):
        queues.setdefault((record.leaf, record.partition), []).append(record)
    tables = {leaf.index for leaf in pipeline.leaves if leaf.kind is SourceKind.TABLE}
    heads = {ident: 0 for ident in queues}
    ordered: list[SideRecord] = []
    while heads:
        ident = min(
            heads, key=lambda i: (queues[i][heads[i]].timestamp, 0 if i[0] in tables else 1, i)
        )
        ordered.append(queues[ident][heads[ident]])
        heads[ident] += 1
        if heads[ident] == len(queues[ident]):
            del heads[ident]
    return ordered


def _flag(side: int) -> int:
    """Kafka Streams orders its outer store by (time, is-left-side, key): right before left."""
    return 1 if side == _LEFT else 0


def _side_columns(node: JoinStep | JoinLeaf) -> list[tuple[str, Any]]:
    if isinstance(node, JoinLeaf):
        return [(p, t) for _c, p, t in node.columns]
    return list(node.columns)


class LocalJoin:
    """A join query run in-process (tests, the conformance runner): states in dicts, pickled
    between records as Spark's state store would, and the query's own operators after it."""

    def __init__(self, pipeline: JoinPipeline, after: Any) -> None:
        import pickle

        self._pickle = pickle
        self.join = pipeline
        self.after = after  # RecordPipeline or LocalAggregation over the joined source
        self.compiled = after.compiled
        self.sink = after.sink
        self._tasks: dict[int, bytes] = {}
        self._keys: dict[tuple[int, tuple[int, str, bytes]], bytes] = {}
        self._offsets: dict[int, int] = {}

    @property
    def topics(self) -> Mapping[str, int]:
        return self.join.topics

    def process_topic(
        self, topic: str, records: list[InputRecord]
    ) -> tuple[list[Any], list[ProcessingError]]:
        """The sink records of ``records`` read from ``topic``, one record at a time."""
        leaf = self.join.topics[topic]
        entering, errors = self.join.enter(leaf, records)
        outputs: list[Any] = []
        for side in entering:
            stored = self._tasks.get(side.task)
            state = self._pickle.loads(stored) if stored else TaskState()
            task_id = side.task

            def load(ident: tuple[int, str, bytes], task_id: int = task_id) -> KeyState | None:
                found = self._keys.get((task_id, ident))
                return self._pickle.loads(found) if found else None

            task = JoinTask(state, load)
            first = self._offsets.get(task_id, 0)
            joined = self.join.join(task, [side], task_id, first)
            self._offsets[task_id] = first + len(joined)
            for ident, value in task.changed.items():
                if value is None:
                    self._keys.pop((task_id, ident), None)
                else:
                    self._keys[(task_id, ident)] = self._pickle.dumps(value)
            self._tasks[task_id] = self._pickle.dumps(task.state)
            if joined:
                out, more = self.after.process(joined)
                outputs.extend(out)
                errors.extend(more)
        return outputs, errors


def _pinned(step: JoinStep) -> bool:
    """Whether a step's records all meet in task 0: a foreign-key join, or a join whose left
    input is (without a repartition) the result of one."""
    if step.foreign_key:
        return True
    return isinstance(step.left, JoinStep) and not step.left_rekey and _pinned(step.left)
