"""What a persistent query's source task does with the records it read: the query's first stage,
in the Spark worker, as Arrow batches. Pure apart from the per-worker cache of built pipelines.

- a stateless query: its `ColumnarPipeline` (sink records, and one row per skipped record), or
  its `RecordPipeline` where it runs record by record (`columnar_run.refusal`);
- an aggregating one: stage 1 of its `AggregatePipeline` (grouped, combined per chunk);
- a join: each side's entries (`joins.entry_rows`).

`kafka_source` imports this module only inside a task, so Spark's streaming source runner (one
Python process per query source, which only plans offsets) never loads the operators of its own;
the fork server (`runner_forks`) imports it once, and its forked workers and runners share it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import pyarrow as pa

from headwater.engine.functions.extensions import ensure
from headwater.engine.persistent import InputRecord, ProcessingError, RecordPipeline
from headwater.engine.persistent.aggregate_run import AggregatePipeline, GroupedRow, TableChange
from headwater.engine.persistent.columnar_group import ColumnarGrouping, grouping_refusal
from headwater.engine.persistent.columnar_run import ColumnarPipeline, output_batch, refusal
from headwater.engine.spark.aggregation import buckets_in, grouped_rows, pipeline_of
from headwater.engine.spark.joins import entry_rows
from headwater.engine.spark.packed import pack
from headwater.engine.spark.worker_heap import built, forget, task_starts
from headwater.metastore.codec import catalog_from_dict

_POLL_BATCH = 5000  # records per Arrow batch of a stateless query or a join's entries
_COMBINE_CHUNK = 50_000  # an aggregate's records grouped (and combined) per Arrow batch

_ARROW_GROUPED = pa.schema(
    [
        ("group", pa.binary()),
        ("row", pa.binary()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("error", pa.string()),
        ("detail", pa.binary()),
    ]
)
_ARROW_ENTRY = pa.schema(
    [
        ("task", pa.int32()),
        ("row", pa.binary()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("error", pa.string()),
        ("detail", pa.binary()),
    ]
)


def _grouped(payload: str, records: Iterator[InputRecord]) -> Iterator[pa.RecordBatch]:
    """An aggregating query's stage 1 (`AggregatePipeline.group`) over what a task reads."""
    pipeline = pipeline_of(payload)
    group = _grouping(payload, pipeline)
    task_starts()  # as in `_stateless`
    buckets = buckets_in(payload)
    running: dict[int, int] = {}  # the batch's ranks run on across chunks
    chunk: list[InputRecord] = []

    def batch() -> pa.RecordBatch:
        items, errors = group(chunk, running)
        return pa.RecordBatch.from_pydict(
            grouped_rows(pipeline, items, errors, buckets), schema=_ARROW_GROUPED
        )

    for record in records:
        chunk.append(record)
        if len(chunk) >= _COMBINE_CHUNK:
            yield batch()
            chunk = []
    if chunk:
        yield batch()


def _entering(payload: str, leaf: int, records: Iterator[InputRecord]) -> Iterator[pa.RecordBatch]:
    """A join query's first stage (`JoinPipeline.enter`) over what a task reads."""
    chunk: list[InputRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= _POLL_BATCH:
            yield pa.RecordBatch.from_pydict(entry_rows(payload, leaf, chunk), schema=_ARROW_ENTRY)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pydict(entry_rows(payload, leaf, chunk), schema=_ARROW_ENTRY)


_lock = threading.Lock()
_pipelines: dict[str, Callable[[list[InputRecord]], pa.RecordBatch]] = {}
_Grouped = tuple[list[GroupedRow | TableChange], list[ProcessingError]]
_groupings: dict[str, Callable[[list[InputRecord], dict[int, int]], _Grouped]] = {}


def _grouping(
    payload: str, pipeline: AggregatePipeline
) -> Callable[[list[InputRecord], dict[int, int]], _Grouped]:
    """An aggregation's stage 1 over a chunk: each record's grouped row, combined per group where
    the pipeline combines and that halves the rows (one row per group of the chunk, not one per
    record, shuffled): `ColumnarGrouping.group_combined` where it groups a batch at a time
    (`columnar_group.grouping_refusal`), else `AggregatePipeline.group` and `combined`."""
    with _lock:
        found = _groupings.get(payload)
        if found is None:
            if grouping_refusal(pipeline.compiled) is None:
                found = ColumnarGrouping(pipeline).group_combined
            else:
                found = partial(_group_per_record, pipeline)
            _groupings[payload] = found
        return found


def _group_per_record(
    pipeline: AggregatePipeline, chunk: list[InputRecord], running: dict[int, int]
) -> _Grouped:
    items, errors = pipeline.group(chunk, running)
    return pipeline.combined(items), errors


def rows_of(options: Mapping[str, str], records: Iterator[InputRecord]) -> Iterator[Any]:
    """The rows a source task yields for what it read (``options``: the source's, lower-cased):
    raw records without a ``query``, else the query's first stage as Arrow batches."""
    payload = options.get("query")
    # pipelines a stateful operator or a join's entries built in this worker are frozen here
    task_starts()
    if not payload:
        for r in records:
            yield (r.key, r.value, r.timestamp, r.partition, r.offset)
        return
    if options.get("output") == "grouped":
        yield from _grouped(payload, records)
    elif options.get("output") == "join":
        yield from _entering(payload, int(options.get("leaf") or 0), records)
    else:
        yield from _stateless(payload, records)


def _stateless(payload: str, records: Iterator[InputRecord]) -> Iterator[pa.RecordBatch]:
    """A stateless query's stage over what a task reads, a `_POLL_BATCH` of records at a time."""
    pipeline = _pipeline(payload)
    task_starts()  # a pipeline built just now is frozen before the task reads its first record
    chunk: list[InputRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= _POLL_BATCH:
            yield pack(pipeline(chunk))
            chunk = []
    if chunk:
        yield pack(pipeline(chunk))


def forget_pipelines() -> None:
    """Drop this worker's built pipelines (the QTT replay, `conformance.qtt_spark`, runs thousands
    of cases' queries in one worker, each once)."""
    with _lock:
        _pipelines.clear()
        _groupings.clear()
    forget()


def _pipeline(payload: str) -> Callable[[list[InputRecord]], pa.RecordBatch]:
    """A stateless query's batch function: `ColumnarPipeline.process` where the query runs a
    batch at a time (`columnar_run.refusal`), else `RecordPipeline.process`'s rows."""
    with _lock:
        found = _pipelines.get(payload)
        if found is None:
            body = json.loads(payload)
            ensure(body["catalog"].get("extensions"))  # the Python functions it calls
            catalog = catalog_from_dict(body["catalog"])
            records = RecordPipeline.for_query(catalog.queries[body["queryId"]], catalog)
            if refusal(records.compiled, records.sink) is None:
                found = ColumnarPipeline(records).process
            else:
                found = partial(_per_record, records)
            _pipelines[payload] = found
            built()
        return found


def _per_record(pipeline: RecordPipeline, chunk: list[InputRecord]) -> pa.RecordBatch:
    return output_batch(*pipeline.process(chunk))
