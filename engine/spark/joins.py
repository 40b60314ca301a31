"""A join query on Spark: each source's records enter the join in its Kafka source's tasks, are
shuffled by join task into one ``transformWithState`` operator that keeps the join's states, and
leave it as the sink's records. Does I/O (inside Spark).

The plan (`join_frame`)::

    kafka source of leaf 0 (enter) --+
    kafka source of leaf 1 (enter) --+--union--groupBy(task)--> JoinProcessor --> the sink
    ...                              --+

A task is the partition a record is joined in (ksqlDB's co-partitioned task): the record's own
partition, or its new key's for a re-keyed side. What the stages compute is
`headwater.engine.persistent.join_run`'s, on pickled records and states; the query's own operators
(projection, WHERE, PARTITION BY) run in the processor on the joined records. A batch's records are
joined in Kafka Streams' order (per source partition in offset order, the partition heads by
timestamp), so a replayed batch gives the same records in the same order.
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from headwater.engine.functions.extensions import ensure
from headwater.engine.persistent import RecordPipeline
from headwater.engine.persistent.aggregate_run import AggregatePipeline, is_aggregate_statement
from headwater.engine.persistent.columnar_run import ColumnarPipeline, refusal
from headwater.engine.persistent.join_run import (
    JoinPipeline,
    JoinTask,
    KeyState,
    SideRecord,
    TaskState,
    merge_order,
)
from headwater.engine.persistent.query_run import InputRecord
from headwater.engine.spark.aggregation import (
    Result,
    Skipped,
    buckets_in,
    column_rows,
    error_detail,
    grouped_rows,
    packed_rows,
    ranked,
    result_row,
    results_batch,
)
from headwater.engine.spark.packed import PACKED_SCHEMA
from headwater.engine.spark.schemas import GROUPED_SCHEMA
from headwater.engine.spark.worker_heap import built, young_generation
from headwater.metastore.codec import catalog_from_dict

_lock = threading.Lock()
_Built = tuple[JoinPipeline, RecordPipeline | AggregatePipeline, ColumnarPipeline | None]
_pipelines: dict[str, _Built] = {}


def pipelines_of(payload: str) -> tuple[JoinPipeline, RecordPipeline | AggregatePipeline]:
    """The join stages and the query's own operators of a query payload (the record pipeline, or
    an aggregation's pipeline whose group stage runs here), built once per worker."""
    join, after, _columnar = _built(payload)
    return join, after


def columnar_of(payload: str) -> ColumnarPipeline | None:
    """The query's own operators a batch at a time over the joined rows (`columnar_run`), where
    they run so; None: record by record."""
    return _built(payload)[2]


def _built(payload: str) -> _Built:
    with _lock:
        found = _pipelines.get(payload)
        if found is None:
            body = json.loads(payload)
            ensure(body["catalog"].get("extensions"))  # the Python functions it calls
            catalog = catalog_from_dict(body["catalog"])
            query = catalog.queries[body["queryId"]]
            after: RecordPipeline | AggregatePipeline
            if is_aggregate_statement(query.statement_text):
                after = AggregatePipeline.for_query(query, catalog, bool(body.get("buffering")))
            else:
                after = RecordPipeline.for_query(query, catalog)
            if after.compiled.join is None:
                raise ValueError(f"query {query.id} has no join")
            columnar = (
                ColumnarPipeline(after)
                if isinstance(after, RecordPipeline) and refusal(after.compiled, after.sink) is None
                else None
            )
            found = (JoinPipeline(query.id, after.compiled.join, catalog.types), after, columnar)
            _pipelines[payload] = found
            built()
        return found


def entry_rows(payload: str, leaf: int, records: list[InputRecord]) -> dict[str, list[Any]]:
    """The first stage over what one source task read: its records as they enter the join, one
    row per join task (a pickled list of `SideRecord`: the shuffle moves a few rows, not one per
    record), and one per skipped record."""
    join, _after = pipelines_of(payload)
    entering, errors = join.enter(leaf, records)
    by_task: dict[int, list[SideRecord]] = {}
    for side in entering:
        by_task.setdefault(side.task, []).append(side)
    columns: dict[str, list[Any]] = {
        n: [] for n in ("task", "row", "source_partition", "source_offset", "error", "detail")
    }
    for task, sides in by_task.items():
        columns["task"].append(task)
        columns["row"].append(pickle.dumps(sides, protocol=pickle.HIGHEST_PROTOCOL))
        columns["source_partition"].append(sides[-1].partition)
        columns["source_offset"].append(sides[-1].offset)
        columns["error"].append(None)
        columns["detail"].append(None)
    for e in errors:
        columns["task"].append(-1)
        columns["row"].append(None)
        columns["source_partition"].append(e.partition)
        columns["source_offset"].append(e.offset)
        columns["error"].append(e.kind)
        columns["detail"].append(error_detail(e.kind, e.message, e.topic))
    return columns


class JoinProcessor(StatefulProcessor):
    """Per join task: the join's states; emits the sink's records of the joined rows, or for an
    aggregation over the join, the grouped rows of its first stage (`GROUPED_SCHEMA`).

    ``packed``: the sink's records leave each call packed (`engine/spark/packed.py`, rows of
    `AGGREGATED_ARROW`), one row per call instead of a Spark row per record, as an aggregation's
    (`aggregation.PackedOutput`); unpacked, they are rows of `AGGREGATED_SCHEMA` (the QTT replay)."""

    def __init__(self, payload: str, packed: bool = False) -> None:
        self.payload = payload
        self.packed = packed

    def init(self, handle: StatefulProcessorHandle) -> None:
        young_generation()
        self.join, self.after = pipelines_of(self.payload)
        self.task = handle.getValueState("task", "state binary")
        self.keys = handle.getMapState("keys", "ident binary", "state binary")

    def _load(self, ident: tuple[int, str, bytes]) -> KeyState | None:
        found = self.keys.getValue((pickle.dumps(ident, protocol=pickle.HIGHEST_PROTOCOL),))
        return pickle.loads(found[0]) if found and found[0] else None

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        if isinstance(self.after, AggregatePipeline):
            return self._grouped(key, rows, self.after)
        if self.packed:
            return self._packed(key, rows)
        return map(result_row, self.results(key, rows))

    def results(self, key: Any, rows: Iterator[Row]) -> Iterator[Result]:
        """A call's records for the sink and skipped records."""
        assert isinstance(self.after, RecordPipeline)
        failed, joined = self._joined(key, rows)
        yield from failed
        if joined:
            columnar = columnar_of(self.payload)
            if columnar is not None:
                outputs, errors = columnar.process_records(joined)
            else:
                outputs, errors = self.after.process(joined)
            yield from outputs
            yield from map(Skipped.of, errors)

    def _packed(self, key: Any, rows: Iterator[Row]) -> Iterator[Row]:
        """`results` as packed rows, computed as columns where the query runs so."""
        assert isinstance(self.after, RecordPipeline)
        failed, joined = self._joined(key, rows)
        parts = [results_batch(failed)] if failed else []
        if joined:
            columnar = columnar_of(self.payload)
            if columnar is not None:
                parts.append(ranked(columnar.process(joined)))
            else:
                outputs, errors = self.after.process(joined)
                parts.append(results_batch([*outputs, *map(Skipped.of, errors)]))
        for part in parts:
            yield from packed_rows(part)

    def _grouped(self, key: Any, rows: Iterator[Row], after: AggregatePipeline) -> Iterator[Row]:
        """An aggregation over the join: its first stage's rows (`GROUPED_SCHEMA`)."""
        failed, joined = self._joined(key, rows)
        for s in failed:
            yield _grouped_error(s.partition, s.offset, s.kind, s.detail)
        if joined:
            items, errors = after.group(joined, {})
            yield from column_rows(grouped_rows(after, items, errors, buckets_in(self.payload)))

    def _joined(self, key: Any, rows: Iterator[Row]) -> tuple[list[Skipped], list[InputRecord]]:
        """The call's entering records joined in the task's states (stored back), and the
        records skipped before it."""
        entering: list[SideRecord] = []
        failed: list[Skipped] = []
        for row in rows:
            if row.error is not None:
                failed.append(
                    Skipped(row.source_partition, row.source_offset, row.error, row.detail)
                )
            else:
                entering.extend(pickle.loads(row.row))
        if not entering:
            return failed, []
        task_id = int(key[0])
        stored = self.task.get() if self.task.exists() else None
        state: TaskState = pickle.loads(stored[0]) if stored and stored[0] else TaskState()
        task = JoinTask(state, self._load)
        joined = self.join.join(task, merge_order(entering, self.join), task_id, state.emitted)
        state.emitted += len(joined)
        for ident, value in task.changed.items():
            packed = (pickle.dumps(ident, protocol=pickle.HIGHEST_PROTOCOL),)
            if value is None:
                self.keys.removeKey(packed)
            else:
                self.keys.updateValue(
                    packed, (pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL),)
                )
        self.task.update((pickle.dumps(task.state, protocol=pickle.HIGHEST_PROTOCOL),))
        return failed, joined

    def close(self) -> None:
        pass


def _grouped_error(partition: int, offset: int, kind: str, detail: bytes | None) -> Row:
    return Row(
        group=b"",
        row=None,
        source_partition=partition,
        source_offset=offset,
        error=kind,
        detail=detail,
    )


def join_frame(entries: list[Any], payload: str, aggregate: bool = False) -> Any:
    """The joined DataFrame of the sources' entry DataFrames: the sink's records (`AGGREGATED_SCHEMA`
    rows, packed: `JoinProcessor`'s ``packed``), or an aggregation's grouped rows (`GROUPED_SCHEMA`)."""
    frame = entries[0]
    for other in entries[1:]:
        frame = frame.unionByName(other)
    if aggregate:
        return frame.groupBy("task").transformWithState(
            JoinProcessor(payload), GROUPED_SCHEMA, "Append", "None"
        )
    return frame.groupBy("task").transformWithState(
        JoinProcessor(payload, packed=True), PACKED_SCHEMA, "Append", "None"
    )
