"""What a persistent query's source task does with the records it read: the query's first stage,
in the Spark worker, as Arrow batches. Pure apart from the per-worker cache of built pipelines.

- a stateless query: its `RecordPipeline` (sink records, and one row per skipped record);
- an aggregating one: stage 1 of its `AggregatePipeline` (grouped, combined per chunk);
- a join: each side's entries (`joins.entry_rows`).

`kafka_source` imports this module only inside a task, so Spark's streaming source runner (one
Python process per query source, which only plans offsets) never loads the operators.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from headwater.engine.persistent import InputRecord, ProcessingError, RecordPipeline
from headwater.engine.persistent.aggregate_run import GroupedRow
from headwater.engine.persistent.query_run import OutputRecord
from headwater.engine.spark.aggregation import grouped_rows, pipeline_of
from headwater.engine.spark.joins import entry_rows
from headwater.metastore.codec import catalog_from_dict

_POLL_BATCH = 5000  # records per Arrow batch of a stateless query or a join's entries
_COMBINE_CHUNK = 50_000  # an aggregate's records grouped (and combined) per Arrow batch

_ARROW_OUTPUT = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
        ("partition", pa.int32()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("error", pa.string()),
    ]
)
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
    running: dict[int, int] = {}  # the batch's ranks run on across chunks
    chunk: list[InputRecord] = []

    def batch() -> pa.RecordBatch:
        items, errors = pipeline.group(chunk, running)
        if pipeline.combines:  # one row per group of the chunk, not one per record
            items = list(pipeline.combine([i for i in items if isinstance(i, GroupedRow)]))
        return pa.RecordBatch.from_pydict(
            grouped_rows(pipeline, items, errors), schema=_ARROW_GROUPED
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


def _arrow(out: list[OutputRecord], errors: list[ProcessingError]) -> pa.RecordBatch:
    rows = len(out) + len(errors)
    columns: dict[str, list[Any]] = {n: [] for n in _ARROW_OUTPUT.names}
    for o in out:
        columns["key"].append(o.key)
        columns["value"].append(o.value)
        columns["timestamp"].append(o.timestamp)
        columns["partition"].append(o.partition)
        columns["source_partition"].append(o.source_partition)
        columns["source_offset"].append(o.source_offset)
        columns["error"].append(None)
    for e in errors:
        columns["key"].append(None)
        columns["value"].append(
            json.dumps({"kind": e.kind, "message": e.message, "topic": e.topic}).encode()
        )
        columns["timestamp"].append(0)
        columns["partition"].append(-1)
        columns["source_partition"].append(e.partition)
        columns["source_offset"].append(e.offset)
        columns["error"].append(e.kind)
    assert all(len(v) == rows for v in columns.values())
    return pa.RecordBatch.from_pydict(columns, schema=_ARROW_OUTPUT)


_lock = threading.Lock()
_pipelines: dict[str, RecordPipeline] = {}


def rows_of(options: Mapping[str, str], records: Iterator[InputRecord]) -> Iterator[Any]:
    """The rows a source task yields for what it read (``options``: the source's, lower-cased):
    raw records without a ``query``, else the query's first stage as Arrow batches."""
    payload = options.get("query")
    if not payload:
        for r in records:
            yield (r.key, r.value, r.timestamp, r.partition, r.offset)
        return
    if options.get("output") == "grouped":
        yield from _grouped(payload, records)
        return
    if options.get("output") == "join":
        yield from _entering(payload, int(options.get("leaf") or 0), records)
        return
    pipeline = _pipeline(payload)
    chunk: list[InputRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= _POLL_BATCH:
            yield _arrow(*pipeline.process(chunk))
            chunk = []
    if chunk:
        yield _arrow(*pipeline.process(chunk))


def _pipeline(payload: str) -> RecordPipeline:
    with _lock:
        found = _pipelines.get(payload)
        if found is None:
            body = json.loads(payload)
            catalog = catalog_from_dict(body["catalog"])
            found = RecordPipeline.for_query(catalog.queries[body["queryId"]], catalog)
            _pipelines[payload] = found
        return found
