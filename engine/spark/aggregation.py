"""An aggregating query on Spark: the grouped rows of the Kafka source, shuffled by group into
``transformWithState`` operators that keep each group's aggregates in Spark's state store. Does I/O
(inside Spark).

The plan (`aggregate_frame`)::

    kafka source (stage 1: group)  --groupBy(bucket of the source key)-->  ChangeProcessor   (TABLE sources only)
                                   --groupBy(bucket of the group)------->  AggregateProcessor --> the sink

Spark shuffles rows by key and keeps the states (RocksDB, checkpointed with the query's offsets, so
a restart neither loses nor double counts an update); what every stage computes is
`headwater.engine.persistent.aggregate_run`'s, run on pickled rows and states. Records the operators
skip travel through the stages as error rows (all under one empty key) to the sink, which logs them.

**State buckets.** Spark's Python state API costs a few socket round trips to the JVM per key and
per state call (~80 us each here): keyed by group, a micro-batch over 100k new groups spent ~2 s
in them alone (4k groups/s; bench.race's count over 1M keys ran at 1.9k records/s). So the keys
(groups, a table's source keys) are spread over `STATE_BUCKETS` buckets by a stable hash
(`bucket_of`), Spark's key is the bucket, and one value state per bucket holds its keys' states
(a pickled dict): a batch reads and writes each bucket it touches once, whatever its number of
groups (~33k new groups/s in the same measure). The cost is the bucket's size: a batch rewrites
every bucket it touches (1M groups: ~8k groups and ~400 KB per bucket). A checkpoint written with
one state per group (before buckets) keeps that layout (`state_layout`), so its query resumes its
counts; windowed aggregations keep their per-task state (their stream time is per task).
"""

from __future__ import annotations

import io
import json
import pickle
import threading
import weakref
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from headwater.engine.functions.extensions import ensure
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    GroupState,
    GroupWindows,
    TableChange,
    TaskState,
    WindowedTask,
)
from headwater.engine.persistent.columnar_update import (
    AGGREGATED_ARROW,
    ColumnarUpdates,
    updates_refusal,
)
from headwater.engine.persistent.query_run import OutputRecord, ProcessingError
from headwater.engine.spark.packed import PACKED_SCHEMA, pack
from headwater.engine.spark.schemas import GROUPED_SCHEMA
from headwater.engine.spark.worker_heap import built, young_generation
from headwater.metastore.codec import catalog_from_dict

_lock = threading.Lock()
_pipelines: dict[str, AggregatePipeline] = {}
_buckets: dict[str, int] = {}
_updates: weakref.WeakKeyDictionary[AggregatePipeline, ColumnarUpdates | None] = (
    weakref.WeakKeyDictionary()
)

#: How many state buckets a new aggregation spreads its groups over (see the module's docstring).
#: Fixed for a query once its checkpoint exists: the layout file of the checkpoint records it.
STATE_BUCKETS = 128
#: The file in a query's checkpoint folder that records its state layout (Spark ignores it).
LAYOUT_FILE = "headwater-state-layout.json"


def bucket_of(key: bytes, buckets: int) -> bytes:
    """The state bucket of a group or source key: a hash that every process computes alike
    (Python's own ``hash`` of bytes differs between processes)."""
    return b"%d" % (zlib.crc32(key) % buckets)


def state_layout(checkpoint: str) -> int:
    """The state buckets of the query whose checkpoint folder is ``checkpoint``: what its layout
    file records; 0 (one state per group, as before buckets) when Spark has written a checkpoint
    there without one; `STATE_BUCKETS` for a new query, recorded in a new layout file. A remote
    checkpoint (a URI: only Spark reads it) keeps one state per group, which is right whatever
    its age."""
    if "://" in checkpoint:
        return 0
    folder = Path(checkpoint)
    layout = folder / LAYOUT_FILE
    if layout.exists():
        return int(json.loads(layout.read_text())["stateBuckets"])
    offsets = folder / "offsets"
    if offsets.is_dir() and any(offsets.iterdir()):
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    partial = layout.with_suffix(".tmp")
    partial.write_text(json.dumps({"stateBuckets": STATE_BUCKETS}))
    partial.replace(layout)
    return STATE_BUCKETS


def buckets_in(payload: str) -> int:
    """The state buckets a query payload names (0: one state per group)."""
    with _lock:
        found = _buckets.get(payload)
        if found is None:
            found = int(json.loads(payload).get("stateBuckets") or 0)
            _buckets[payload] = found
        return found


def pipeline_of(payload: str) -> AggregatePipeline:
    """The aggregate pipeline of a query payload (JSON: query id, catalog, buffering), built once
    per Python worker."""
    with _lock:
        found = _pipelines.get(payload)
        if found is None:
            body = json.loads(payload)
            ensure(body["catalog"].get("extensions"))  # the Python functions it calls
            catalog = catalog_from_dict(body["catalog"])
            found = AggregatePipeline.for_query(
                catalog.queries[body["queryId"]], catalog, buffering=bool(body.get("buffering"))
            )
            _pipelines[payload] = found
            built()
        return found


def updates_of(pipeline: AggregatePipeline) -> ColumnarUpdates | None:
    """The pipeline's stage 3 writing a call's updates as columns, or None: it writes them per
    group (`updates_refusal`); built once per pipeline (the conformance runner's operators change
    pipelines between calls)."""
    with _lock:
        if pipeline not in _updates:
            why = updates_refusal(pipeline.compiled, pipeline.sink, pipeline.buffering)
            _updates[pipeline] = ColumnarUpdates(pipeline) if why is None else None
        return _updates[pipeline]


def grouped_rows(
    pipeline: AggregatePipeline,
    items: list[GroupedRow | TableChange],
    errors: list[ProcessingError],
    buckets: int = 0,
) -> dict[str, list[Any]]:
    """Stage 1's output as the columns of `GROUPED_SCHEMA`, keyed for the next stage's shuffle: by
    source key (a table's change stage), by task (windowed), or by group; with ``buckets``, by
    the state bucket of the source key or group (`bucket_of`). One row per key holds the pickled
    list of its items, in order (the shuffle and the next stage's Python handle a row per key and
    call, not one per record); one row per skipped record."""
    windowed = pipeline.compiled.window is not None
    by_key: dict[bytes, list[GroupedRow | TableChange]] = {}
    for item in items:
        if isinstance(item, TableChange):
            key = bucket_of(item.source_key, buckets) if buckets else item.source_key
        elif windowed:
            key = b"%d" % pipeline.task_of(item.group)
        else:
            key = bucket_of(item.group, buckets) if buckets else item.group
        found = by_key.get(key)
        if found is None:
            by_key[key] = [item]
        else:
            found.append(item)
    return _item_rows(by_key, errors)


def _item_rows(
    by_key: dict[bytes, list[Any]], errors: list[ProcessingError]
) -> dict[str, list[Any]]:
    """The columns of `GROUPED_SCHEMA`: a row per key with its items, a row per error."""
    columns: dict[str, list[Any]] = {
        n: [] for n in ("group", "row", "source_partition", "source_offset", "error", "detail")
    }
    for key, members in by_key.items():
        columns["group"].append(key)
        columns["row"].append(ship(members))
        columns["source_partition"].append(members[-1].partition)
        columns["source_offset"].append(members[-1].offset)
        columns["error"].append(None)
        columns["detail"].append(None)
    for e in errors:
        columns["group"].append(b"")
        columns["row"].append(None)
        columns["source_partition"].append(e.partition)
        columns["source_offset"].append(e.offset)
        columns["error"].append(e.kind)
        columns["detail"].append(error_detail(e.kind, e.message, e.topic))
    return columns


def ship(items: list[GroupedRow | TableChange]) -> bytes:
    """A key's items as one value of `GROUPED_SCHEMA`'s ``row``: pickled, a grouped row as the
    plain tuple of its fields (a named tuple pickles through its ``__getnewargs__``, one call per
    row: 4 us a row there and back, 2.4 with `shipped`'s rebuilding), without a memo (`flat`)."""
    return flat([tuple(i) if type(i) is GroupedRow else i for i in items])


def flat(value: Any) -> bytes:
    """``value`` pickled without the pickler's memo (its "fast" mode): a tree of values (rows,
    records, bytes by key) has no object twice that it must keep shared and no cycle (the C
    pickler refuses one, it does not loop), and memoizing every object took three quarters of
    the time (a bucket's 100k rows: 0.8 -> 0.2 us a row)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    pickler.dump(value)
    return out.getvalue()


def shipped(blob: bytes) -> list[Any]:
    """The items `ship` wrote (`GroupedRow` and `TableChange` values)."""
    return [_grouped(i) if type(i) is tuple else i for i in pickle.loads(blob)]


def _grouped(fields: tuple[Any, ...]) -> GroupedRow:
    return tuple.__new__(GroupedRow, fields)


def error_detail(kind: str, message: str, topic: str) -> bytes:
    """A skipped record's detail, as the stateless stage writes it (`columnar_run.output_batch`)."""
    return json.dumps({"kind": kind, "message": message, "topic": topic}).encode()


class _KeyStates:
    """The states a processor keeps per key (a group, a source key), as pickled values: one value
    state per key (``buckets`` 0, Spark's key is the key itself), or one per bucket holding its
    keys' values (Spark's key is the bucket: read once, written once by `save`)."""

    def __init__(self, state: Any, bucketed: bool) -> None:
        self._state = state
        self._bucketed = bucketed
        # a bucket is read with one call (`get` answers None for a bucket not written yet, and
        # Spark logs a warning then: once per bucket); a state per group asks first, as before
        stored = state.get() if bucketed or state.exists() else None
        value = stored[0] if stored else None
        if bucketed:
            self._entries: dict[bytes, bytes] = pickle.loads(value) if value else {}
        else:
            self._value: bytes | None = value or None

    def get(self, key: bytes) -> bytes | None:
        return self._entries.get(key) if self._bucketed else self._value

    def put(self, key: bytes, value: bytes | None) -> None:
        if not self._bucketed:
            self._value = value
        elif value is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = value

    def save(self) -> None:
        if self._bucketed:
            if self._entries:
                entries = flat(self._entries)
                self._state.update((entries,))
            else:
                self._state.clear()
        elif self._value is None:
            self._state.clear()
        else:
            self._state.update((self._value,))


def _dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class ChangeProcessor(StatefulProcessor):
    """Stage 2 (TABLE sources): per source key, the key's last row; emits undo and add rows."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def init(self, handle: StatefulProcessorHandle) -> None:
        young_generation()
        self.pipeline = pipeline_of(self.payload)
        self.buckets = buckets_in(self.payload)
        if self.buckets:
            self.last = handle.getValueState("rows", "rows binary")
        else:
            self.last = handle.getValueState("row", "row binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        out: list[Row] = []
        by_key: dict[bytes, list[TableChange]] = {}
        for row in rows:
            if row.error is not None:
                out.append(row)
                continue
            change: TableChange
            for change in shipped(row.row):
                found = by_key.get(change.source_key)
                if found is None:
                    by_key[change.source_key] = [change]
                else:
                    found.append(change)
        if by_key:
            states = _KeyStates(self.last, bool(self.buckets))
            onward: dict[bytes, list[GroupedRow]] = {}
            for source_key, changes in by_key.items():
                stored = states.get(source_key)
                previous: GroupedRow | None = pickle.loads(stored) if stored else None
                for change in sorted(changes, key=lambda c: (c.partition, c.offset)):
                    for grouped in self.pipeline.change(previous, change):
                        group = grouped.group
                        onward.setdefault(
                            bucket_of(group, self.buckets) if self.buckets else group, []
                        ).append(grouped)
                    previous = change.row
                states.put(source_key, None if previous is None else _dumps(previous))
            states.save()
            out.extend(column_rows(_item_rows(onward, [])))
        yield from out

    def close(self) -> None:
        pass


def group_state_bytes(state: GroupState) -> bytes:
    """A group's state as its state store keeps it: the pickled tuple of its fields (a pickled
    `GroupState` names its class in every group's bytes: 124 bytes for a count and a sum, 25 as a
    tuple, and a bucket's groups are all rewritten whenever the bucket changes)."""
    return _dumps((state.aggregates, state.timestamp, state.passed))


def group_state(stored: bytes | None) -> GroupState | None:
    """The group's state from what `group_state_bytes` wrote, or a pickled `GroupState` (what
    a checkpoint written before kept)."""
    if not stored:
        return None
    found = pickle.loads(stored)
    return GroupState(*found) if type(found) is tuple else found


class AggregateProcessor(StatefulProcessor):
    """Stage 3: per group, the aggregates' states; emits the group's updates (with buffering, a
    call's updates are written as columns: `ColumnarUpdates`)."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def init(self, handle: StatefulProcessorHandle) -> None:
        young_generation()
        self.pipeline = pipeline_of(self.payload)
        if buckets_in(self.payload):
            self.bucketed, self.state = True, handle.getValueState("groups", "groups binary")
        else:
            self.bucketed = False
            self.state = handle.getValueState("aggregates", "state binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        for values in self.results_batch(rows).to_pylist():
            yield Row(**values)

    def results_batch(self, rows: Iterator[Row]) -> pa.RecordBatch:
        """A call's records for the sink and skipped records, as a batch of `AGGREGATED_ARROW`."""
        failed, grouped = _grouped_rows(rows)
        if not grouped:
            return results_batch(failed)
        states = _KeyStates(self.state, self.bucketed)
        updates = updates_of(self.pipeline)
        if updates is None:
            out = failed
            by_group: dict[bytes, list[GroupedRow]] = {}
            for row in grouped:
                by_group.setdefault(row.group, []).append(row)
            for group, group_rows in by_group.items():
                state, outputs, errors = self.pipeline.aggregate(
                    group_state(states.get(group)), group_rows
                )
                states.put(group, group_state_bytes(state))
                out.extend(outputs)
                out.extend(map(Skipped.of, errors))
            states.save()
            return results_batch(out)
        batch, slow, errors = updates.aggregate(
            grouped,
            lambda group: group_state(states.get(group)),
            lambda group, state: states.put(group, group_state_bytes(state)),
        )
        states.save()
        if not (failed or slow or errors):
            return batch
        return pa.concat_batches([batch, results_batch([*failed, *slow, *map(Skipped.of, errors)])])

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record an operator skipped (or a stage before it did): its place, kind and detail (the
    JSON the sink logs)."""

    partition: int
    offset: int
    kind: str
    detail: bytes | None

    @staticmethod
    def of(e: ProcessingError) -> Skipped:
        return Skipped(e.partition, e.offset, e.kind, error_detail(e.kind, e.message, e.topic))


#: What an operator whose records go to the sink computes per call (`AGGREGATED_SCHEMA` rows).
Result = OutputRecord | Skipped


def result_row(r: Result) -> Row:
    """A result as a row of `AGGREGATED_SCHEMA`."""
    if isinstance(r, Skipped):
        return error_row(r.partition, r.offset, r.kind, r.detail)
    return output_row(r)


def output_row(o: OutputRecord) -> Row:
    """A sink record as a row of `AGGREGATED_SCHEMA`."""
    return Row(
        key=o.key,
        value=o.value,
        timestamp=o.timestamp,
        partition=o.partition,
        source_partition=o.source_partition,
        source_offset=o.source_offset,
        source_seq=o.source_seq,
        source_rank=o.source_rank,
        error=None,
    )


class WarmUpCounter(StatefulProcessor):
    """Counts rows per group in a value state: the warm-up's stateful query (`warm_up_stateful`),
    which loads what a first aggregation's batch otherwise loads (the state store, the operator's
    classes, its Python worker) before any query needs it."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("n", "n long")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        stored = self.state.get() if self.state.exists() else None
        count = sum(1 for _ in rows) + (int(stored[0]) if stored else 0)
        self.state.update((count,))
        yield Row(group=key[0], n=count)

    def close(self) -> None:
        pass


def warm_up_stateful(spark: Any, checkpoint: str, timeout_s: float) -> bool:
    """Run one micro-batch of a small aggregation (Spark's ``rate-micro-batch`` source, a
    ``transformWithState`` count, a ``foreachBatch`` that collects it as Arrow, as the sink does)
    with its checkpoint in ``checkpoint``; whether it finished within ``timeout_s``."""
    frame = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 4)
        .option("numPartitions", 2)
        .load()
        .selectExpr("CAST(value % 2 AS STRING) AS group")
        .groupBy("group")
        .transformWithState(WarmUpCounter(), "group string, n long", "Append", "None")
    )
    query = (
        frame.writeStream.foreachBatch(_collect)
        .option("checkpointLocation", checkpoint)
        .trigger(once=True)
        .start()
    )
    try:
        return bool(query.awaitTermination(timeout_s))
    finally:
        query.stop()


def _collect(batch: Any, _batch_id: int) -> None:
    batch.toArrow()


class WindowedProcessor(StatefulProcessor):
    """Stage 3 of a windowed aggregation: per task (ksqlDB's re-partition partition), its stream
    time and window index, and its groups' windows; emits updates, tombstones, final results."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def init(self, handle: StatefulProcessorHandle) -> None:
        young_generation()
        self.pipeline = pipeline_of(self.payload)
        self.task = handle.getValueState("task", "state binary")
        self.groups = handle.getMapState("groups", "group binary", "windows binary")

    def _load(self, group: bytes) -> GroupWindows | None:
        found = self.groups.getValue((group,))
        return pickle.loads(found[0]) if found and found[0] else None

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        return map(result_row, self.results(rows))

    def results_batch(self, rows: Iterator[Row]) -> pa.RecordBatch:
        """`results` as a batch of `AGGREGATED_ARROW`."""
        return results_batch(list(self.results(rows)))

    def results(self, rows: Iterator[Row]) -> Iterator[Result]:
        """A call's records for the sink and skipped records (`handleInputRows` as rows)."""
        failed, grouped = _grouped_rows(rows)
        yield from failed
        if not grouped:
            return
        stored = self.task.get()  # None before the task's first batch (one call, not two)
        state: TaskState = pickle.loads(stored[0]) if stored and stored[0] else TaskState()
        task = WindowedTask(state, self._load)
        outputs, errors = self.pipeline.aggregate_windowed(task, grouped)
        for group, windows in task.changed.items():
            if windows is None:
                self.groups.removeKey((group,))
            else:
                self.groups.updateValue(
                    (group,), (pickle.dumps(windows, protocol=pickle.HIGHEST_PROTOCOL),)
                )
        self.task.update((pickle.dumps(task.state, protocol=pickle.HIGHEST_PROTOCOL),))
        yield from outputs
        yield from map(Skipped.of, errors)

    def close(self) -> None:
        pass


def _grouped_rows(rows: Iterator[Row]) -> tuple[list[Result], list[GroupedRow]]:
    """A stage-3 batch: its error rows (passed on as skipped records) and its grouped records."""
    errors: list[Result] = []
    grouped: list[GroupedRow] = []
    for row in rows:
        if row.error is not None:
            errors.append(Skipped(row.source_partition, row.source_offset, row.error, row.detail))
        else:
            grouped.extend(shipped(row.row))
    return errors, grouped


def skipped_row(e: ProcessingError) -> Row:
    """A record an operator skipped, as a row of `AGGREGATED_SCHEMA` (the sink logs it)."""
    return error_row(e.partition, e.offset, e.kind, error_detail(e.kind, e.message, e.topic))


def column_rows(columns: dict[str, list[Any]]) -> Iterator[Row]:
    """The rows of columns (name -> values, all of one length)."""
    for values in zip(*columns.values(), strict=True):
        yield Row(**dict(zip(columns, values, strict=True)))


def error_row(partition: int, offset: int, kind: str, detail: bytes | None) -> Row:
    """A skipped record as a row of `AGGREGATED_SCHEMA`: its place and kind, its detail (JSON)."""
    return Row(
        key=None,
        value=detail,
        timestamp=0,
        partition=-1,
        source_partition=partition,
        source_offset=offset,
        source_seq=0,
        source_rank=0,
        error=kind,
    )


def aggregate_frame(grouped: Any, payload: str, table_source: bool, windowed: bool) -> Any:
    """The aggregated DataFrame of stage 1's streaming DataFrame: `AGGREGATED_SCHEMA` rows, packed
    (`PackedOutput`)."""
    frame = grouped
    if windowed:
        return frame.groupBy("group").transformWithState(
            PackedOutput(WindowedProcessor(payload)), PACKED_SCHEMA, "Append", "None"
        )
    if table_source:
        frame = frame.groupBy("group").transformWithState(
            ChangeProcessor(payload), GROUPED_SCHEMA, "Append", "None"
        )
    return frame.groupBy("group").transformWithState(
        PackedOutput(AggregateProcessor(payload)), PACKED_SCHEMA, "Append", "None"
    )


class ResultsOperator(Protocol):
    """A stateful operator whose records go to the sink (`AggregateProcessor`,
    `WindowedProcessor`): its results per call, not yet rows."""

    def init(self, handle: StatefulProcessorHandle) -> None: ...

    def results_batch(self, rows: Iterator[Row]) -> pa.RecordBatch: ...

    def close(self) -> None: ...


class PackedOutput(StatefulProcessor):
    """An operator whose results go to the sink, its results of a call leaving it packed
    (`engine/spark/packed.py`): Spark's JVM then moves one row per call (per state bucket) instead
    of every output record, twice converted (to Spark's rows, back to Arrow for the sink), and the
    results become Arrow columns without a Spark row each."""

    def __init__(self, inner: ResultsOperator) -> None:
        self.inner = inner

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.inner.init(handle)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        batch = self.inner.results_batch(rows)
        if batch.num_rows:
            yield from packed_rows(batch)

    def close(self) -> None:
        self.inner.close()


def packed_rows(batch: pa.RecordBatch) -> Iterator[Row]:
    """``batch`` as an operator's output rows of `PACKED_SCHEMA` (`packed.pack`)."""
    for blob in pack(batch).column(0).to_pylist():
        yield Row(records=blob)


def results_batch(results: Sequence[Result]) -> pa.RecordBatch:
    """Results as one Arrow batch of `AGGREGATED_ARROW`."""
    columns = list(zip(*map(_result_values, results))) or [() for _ in AGGREGATED_ARROW]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, AGGREGATED_ARROW, strict=True)],
        schema=AGGREGATED_ARROW,
    )


def ranked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of `columnar_run.OUTPUT_ARROW` (a stateless pipeline's records) as one of
    `AGGREGATED_ARROW`: each record the first of its input (``source_seq`` 0), unranked."""
    n = batch.num_rows
    columns = [batch.column(f.name) for f in AGGREGATED_ARROW if f.name in batch.schema.names]
    at = AGGREGATED_ARROW.get_field_index("source_seq")
    columns[at:at] = [pa.nulls(n, pa.int32()).fill_null(0), pa.nulls(n, pa.int64()).fill_null(0)]
    return pa.RecordBatch.from_arrays(columns, schema=AGGREGATED_ARROW)


def _result_values(r: Result) -> tuple[Any, ...]:
    """A result's values in `AGGREGATED_ARROW`'s column order (as `result_row` names them)."""
    if isinstance(r, Skipped):
        return (None, r.detail, 0, -1, r.partition, r.offset, 0, 0, r.kind)
    return (
        r.key,
        r.value,
        r.timestamp,
        r.partition,
        r.source_partition,
        r.source_offset,
        r.source_seq,
        r.source_rank,
        None,
    )
