"""An aggregating query on Spark: the grouped rows of the Kafka source, shuffled by group into
``transformWithState`` operators that keep each group's aggregates in Spark's state store. Does I/O
(inside Spark).

The plan (`aggregate_frame`)::

    kafka source (stage 1: group)  --groupBy(source key)-->  ChangeProcessor   (TABLE sources only)
                                   --groupBy(group)------->  AggregateProcessor --> the sink

Spark shuffles rows by key and keeps the states (RocksDB, checkpointed with the query's offsets, so
a restart neither loses nor double counts an update); what every stage computes is
`headwater.engine.persistent.aggregate_run`'s, run on pickled rows and states. Records the operators
skip travel through the stages as error rows (all under one empty key) to the sink, which logs them.
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    GroupState,
    GroupWindows,
    TableChange,
    TaskState,
    WindowedTask,
)
from headwater.engine.persistent.query_run import ProcessingError
from headwater.engine.spark.schemas import AGGREGATED_SCHEMA, GROUPED_SCHEMA
from headwater.metastore.codec import catalog_from_dict

_lock = threading.Lock()
_pipelines: dict[str, AggregatePipeline] = {}


def pipeline_of(payload: str) -> AggregatePipeline:
    """The aggregate pipeline of a query payload (JSON: query id, catalog, buffering), built once
    per Python worker."""
    with _lock:
        found = _pipelines.get(payload)
        if found is None:
            body = json.loads(payload)
            catalog = catalog_from_dict(body["catalog"])
            found = AggregatePipeline.for_query(
                catalog.queries[body["queryId"]], catalog, buffering=bool(body.get("buffering"))
            )
            _pipelines[payload] = found
        return found


def grouped_rows(
    pipeline: AggregatePipeline,
    items: list[GroupedRow | TableChange],
    errors: list[ProcessingError],
) -> dict[str, list[Any]]:
    """Stage 1's output as the columns of `GROUPED_SCHEMA`, keyed for the next stage's shuffle: by
    source key (a table's change stage), by task (windowed), or by group."""
    columns: dict[str, list[Any]] = {
        n: [] for n in ("group", "row", "source_partition", "source_offset", "error", "detail")
    }
    windowed = pipeline.compiled.window is not None
    for item in items:
        if isinstance(item, TableChange):
            columns["group"].append(item.source_key)
        elif windowed:
            columns["group"].append(b"%d" % pipeline.task_of(item.group))
        else:
            columns["group"].append(item.group)
        columns["row"].append(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
        columns["source_partition"].append(item.partition)
        columns["source_offset"].append(item.offset)
        columns["error"].append(None)
        columns["detail"].append(None)
    for e in errors:
        columns["group"].append(b"")
        columns["row"].append(None)
        columns["source_partition"].append(e.partition)
        columns["source_offset"].append(e.offset)
        columns["error"].append(e.kind)
        columns["detail"].append(_detail(e.message, e.topic))
    return columns


def _detail(message: str, topic: str) -> bytes:
    return json.dumps({"message": message, "topic": topic}).encode()


class ChangeProcessor(StatefulProcessor):
    """Stage 2 (TABLE sources): per source key, the key's last row; emits undo and add rows."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.pipeline = pipeline_of(self.payload)
        self.last = handle.getValueState("row", "row binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        changes: list[TableChange] = []
        for row in rows:
            if row.error is not None:
                yield row
            else:
                changes.append(pickle.loads(row.row))
        if not changes:
            return
        stored = self.last.get() if self.last.exists() else None
        previous: GroupedRow | None = pickle.loads(stored[0]) if stored and stored[0] else None
        for change in sorted(changes, key=lambda c: (c.partition, c.offset)):
            for out in self.pipeline.change(previous, change):
                yield Row(
                    group=out.group,
                    row=pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL),
                    source_partition=out.partition,
                    source_offset=out.offset,
                    error=None,
                    detail=None,
                )
            previous = change.row
        if previous is None:
            self.last.clear()
        else:
            self.last.update((pickle.dumps(previous, protocol=pickle.HIGHEST_PROTOCOL),))

    def close(self) -> None:
        pass


class AggregateProcessor(StatefulProcessor):
    """Stage 3: per group, the aggregates' states; emits the group's updates."""

    def __init__(self, payload: str) -> None:
        self.payload = payload

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.pipeline = pipeline_of(self.payload)
        self.state = handle.getValueState("aggregates", "state binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        failed, grouped = _grouped_rows(rows)
        yield from failed
        if not grouped:
            return
        stored = self.state.get() if self.state.exists() else None
        state: GroupState | None = pickle.loads(stored[0]) if stored and stored[0] else None
        state, outputs, errors = self.pipeline.aggregate(state, grouped)
        self.state.update((pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL),))
        for o in outputs:
            yield Row(
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
        for e in errors:
            yield _error_row(e.partition, e.offset, e.kind, _detail(e.message, e.topic))

    def close(self) -> None:
        pass


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
        self.pipeline = pipeline_of(self.payload)
        self.task = handle.getValueState("task", "state binary")
        self.groups = handle.getMapState("groups", "group binary", "windows binary")

    def _load(self, group: bytes) -> GroupWindows | None:
        found = self.groups.getValue((group,))
        return pickle.loads(found[0]) if found and found[0] else None

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        failed, grouped = _grouped_rows(rows)
        yield from failed
        if not grouped:
            return
        stored = self.task.get() if self.task.exists() else None
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
        for o in outputs:
            yield Row(
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
        for e in errors:
            yield _error_row(e.partition, e.offset, e.kind, _detail(e.message, e.topic))

    def close(self) -> None:
        pass


def _grouped_rows(rows: Iterator[Row]) -> tuple[list[Row], list[GroupedRow]]:
    """A stage-3 batch: its error rows (passed on as output rows) and its grouped records."""
    errors: list[Row] = []
    grouped: list[GroupedRow] = []
    for row in rows:
        if row.error is not None:
            errors.append(
                _error_row(row.source_partition, row.source_offset, row.error, row.detail)
            )
        else:
            grouped.append(pickle.loads(row.row))
    return errors, grouped


def _error_row(partition: int, offset: int, kind: str, detail: bytes | None) -> Row:
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
    """The aggregated DataFrame (`AGGREGATED_SCHEMA`) of stage 1's streaming DataFrame."""
    frame = grouped
    if windowed:
        return frame.groupBy("group").transformWithState(
            WindowedProcessor(payload), AGGREGATED_SCHEMA, "Append", "None"
        )
    if table_source:
        frame = frame.groupBy("group").transformWithState(
            ChangeProcessor(payload), GROUPED_SCHEMA, "Append", "None"
        )
    return frame.groupBy("group").transformWithState(
        AggregateProcessor(payload), AGGREGATED_SCHEMA, "Append", "None"
    )
