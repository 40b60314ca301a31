"""A stateless persistent query a batch at a time: decode, filter, project and encode as columns. Pure.

`RecordPipeline` (`query_run.py`) defines a stateless query's output record by record; this module
computes the same records for a whole batch at once (`ColumnarPipeline.process`):

1. the batch's keys and values become columns (`engine/columnar/`): JSON objects with orjson and
   one Arrow conversion per column, a KAFKA STRING key with one UTF-8 check, other formats through
   the source's serde record by record; ROWTIME, ROWPARTITION and ROWOFFSET are columns too;
2. WHERE, the key expressions and the projection run as Arrow kernels where those give the
   per-record values, and per record (per expression, per row) elsewhere (`engine/columnar/kernels.py`);
3. a JSON sink's values are written as columns of JSON fragments joined into objects, a KAFKA STRING
   key as the UTF-8 of its column; other formats per row through the sink's serde.

Rows the columns cannot hold or a per-record step raised on (a record that does not decode, a
value with a lone surrogate, ...), records without a value and any batch the vectorized steps fail
on run through `RecordPipeline` itself, which skips and reports them with its own messages. So the
output, processing errors included, is the per-record path's whatever the records are: the order of
the rows in the batch may differ, which nothing reads (the sink orders a batch by source position,
`OutputRecord.order`). tests/engine/test_columnar_differential.py holds both equal on random
queries and records.

Queries it does not run (`refusal` says why; they run per record): tables (a changelog, row by row),
table functions, windowed sources, a TIMESTAMP column on the sink (or on the source, unless BIGINT or STRING: those
are read value by value as the per-record path reads them), header columns, and joins' inputs.

A join's output (a stream's: a table's changelog runs row by row) is the query's source: its
records' rows are already decoded (`InputRecord.row`, every column of the query's scope), so step 1
reads those rows into columns (`SourceColumns.rows`) instead of decoding bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from headwater.engine.columnar.batch import Column
from headwater.engine.columnar.json_columns import json_fragments, json_objects
from headwater.engine.columnar.kernels import Vector, vectorize
from headwater.engine.columnar.partitions import partitions_of
from headwater.engine.formats.serde import RowSerde, json_object_values
from headwater.engine.functions import user_index
from headwater.engine.functions.types import STRING
from headwater.engine.persistent.query_plan import CompiledQuery
from headwater.engine.persistent.query_run import (
    InputRecord,
    OutputRecord,
    ProcessingError,
    RecordPipeline,
)
from headwater.engine.persistent.source_columns import (
    SourceColumns,
    columns_refusal,
    kafka_string_key,
)
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext.sqltypes import SqlType

#: The rows a stateless query's source task hands Spark (`engine/spark/schemas.OUTPUT_SCHEMA`).
OUTPUT_ARROW = pa.schema(
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


def output_batch(out: Sequence[OutputRecord], errors: Sequence[ProcessingError]) -> pa.RecordBatch:
    """The per-record path's outputs and skipped records as rows of `OUTPUT_ARROW`."""
    columns: dict[str, list[Any]] = {n: [] for n in OUTPUT_ARROW.names}
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
    return pa.RecordBatch.from_pydict(columns, schema=OUTPUT_ARROW)


def calls_unvectorized(nodes: Iterable[exp.Expr]) -> bool:
    """Whether an expression of ``nodes`` calls a Python function that is not vectorized (it
    then runs record by record: the batch paths' common refusal)."""
    return any(
        (found := user_index.lookup(call.name)) is not None
        and not all(o.vectorized for o in found.overloads)
        for node in nodes
        for call in node.find_all(exp.Anonymous)
    )


def refusal(compiled: CompiledQuery, sink: Source | None) -> str | None:
    """Why the query runs record by record, or None: it runs a batch at a time."""
    source = compiled.source
    if compiled.kind is SourceKind.TABLE:
        return "a table's changelog runs row by row"
    if compiled.table_functions:
        return "table functions"
    if calls_unvectorized(
        n
        for n in (compiled.where_node, *compiled.key_nodes, *compiled.value_nodes)
        if n is not None
    ):
        return "a Python function that is not vectorized"
    if compiled.scope is None:
        return "no scope compiled"
    if source.windowed:
        return "a windowed source (each key keeps its record's window)"
    if sink is not None and sink.timestamp_column is not None:
        return "a TIMESTAMP column on the sink"
    why = None if compiled.join is not None else columns_refusal(source)  # rows come decoded
    if why is not None:
        return why
    if sink is not None and [(c.name, c.type) for c in sink.value_columns] != [
        (c.name, c.type.sql()) for c in compiled.value_columns
    ]:
        return "the sink's value columns differ from the projection's"
    return None


@dataclass(frozen=True, slots=True)
class Execution:
    """How a query's expressions run (for EXPLAIN): WHERE, keys and values as `Vector`s."""

    where: Vector | None
    keys: tuple[Vector, ...]
    values: tuple[Vector, ...]

    @classmethod
    def of(cls, compiled: CompiledQuery) -> Execution:
        """The vectors of a query `refusal` accepts."""
        assert compiled.scope is not None
        scope = compiled.scope
        return cls(
            None if compiled.where_node is None else vectorize(compiled.where_node, scope),
            tuple(vectorize(n, scope) for n in compiled.key_nodes),
            tuple(vectorize(n, scope) for n in compiled.value_nodes),
        )

    def describe(self, compiled: CompiledQuery) -> str:
        """One line: each expression's mode (``vectorized``, ``per record``, ...)."""
        parts = [
            f"{c.name} {v.mode}"
            for c, v in zip(compiled.key_columns + compiled.value_columns, self.keys + self.values)
        ]
        if self.where is not None:
            parts.insert(0, f"WHERE {self.where.mode}")
        return "Execution: Arrow batches; " + ", ".join(parts)


def execution_line(compiled: CompiledQuery, sink: Source | None) -> str:
    """EXPLAIN's line on how the query runs: a batch at a time, with each expression's mode, or
    record by record and why."""
    why = refusal(compiled, sink)
    if why is not None:
        return f"Execution: record by record ({why})"
    return Execution.of(compiled).describe(compiled)


class ColumnarPipeline:
    """A stateless query's records, a batch at a time (see the module docstring)."""

    def __init__(self, records: RecordPipeline) -> None:
        why = refusal(records.compiled, records.sink)
        if why is not None:
            raise ValueError(f"query {records.query_id} runs record by record: {why}")
        self.records = records
        self.compiled = compiled = records.compiled
        self.execution = Execution.of(compiled)
        resolved = compiled.scope.columns if compiled.scope is not None else {}
        self._source = SourceColumns(compiled.source, records.source_serde, resolved)
        sink = records.sink
        self._sink_serde = records.sink_serde
        self._sink_json = json_object_values(sink)
        self._sink_kafka_string_key = (
            kafka_string_key(sink)
            and len(compiled.key_columns) == 1
            and compiled.key_columns[0].type == STRING
        )
        self._sink_partitions = sink.partitions
        self._value_names = [c.name for c in compiled.value_columns]
        self._value_types = [c.type for c in compiled.value_columns]
        #: a join's output: records with their rows decoded (`SourceColumns.rows`)
        self._joined = compiled.join is not None
        self.fallbacks = 0  # batches the vectorized steps failed on, run per record instead

    def process(self, records: Sequence[InputRecord]) -> pa.RecordBatch:
        """The rows of `OUTPUT_ARROW` the per-record path gives ``records`` (in any order)."""
        if not records:
            return output_batch([], [])
        try:
            return self._process(records)
        except Exception:  # noqa: BLE001 - a kernel's surprise: the per-record path decides
            self.fallbacks += 1
            return output_batch(*self.records.process(records))

    def process_records(
        self, records: Sequence[InputRecord]
    ) -> tuple[list[OutputRecord], list[ProcessingError]]:
        """`process` as `RecordPipeline.process` answers: sink records in input order, and the
        records skipped (for runners that read records, not Arrow: the conformance runner)."""
        out: list[OutputRecord] = []
        errors: list[ProcessingError] = []
        topic = self.compiled.source.topic
        for row in self.process(records).to_pylist():
            if row["error"] is not None:
                detail = json.loads(row["value"])
                errors.append(
                    ProcessingError(
                        self.records.query_id,
                        row["error"],
                        detail["message"],
                        detail.get("topic", topic),
                        row["source_partition"],
                        row["source_offset"],
                    )
                )
            else:
                out.append(
                    OutputRecord(
                        row["key"],
                        row["value"],
                        row["timestamp"],
                        row["partition"],
                        row["source_partition"],
                        row["source_offset"],
                    )
                )
        out.sort(key=OutputRecord.order)
        errors.sort(key=lambda e: (e.partition, e.offset))
        return out, errors

    def _process(self, records: Sequence[InputRecord]) -> pa.RecordBatch:
        joined = self._joined
        special = {
            i for i, r in enumerate(records) if r.value is None or (r.row is not None) is not joined
        }
        batch, bad = self._source.rows(records) if joined else self._source.decode(records)
        for i in special:
            bad.setdefault(i, "per record")
        execution = self.execution
        stamps = batch.values("ROWTIME")
        if execution.where is not None:
            keep = pc.fill_null(execution.where.run(batch, bad), False)
            kept = pc.indices_nonzero(keep)
            batch = batch.take(kept)
            rows = kept.to_pylist()
        else:
            rows = list(range(len(records)))
        stage_bad: dict[int, str] = {}
        keys = [v.run(batch, stage_bad) for v in execution.keys]
        values = [v.run(batch, stage_bad) for v in execution.values]
        key_bytes = self._keys(records, rows, keys, stage_bad)
        value_bytes = self._values(values, stage_bad)
        for j, why in stage_bad.items():
            bad.setdefault(rows[j], why)
        good = [j for j, i in enumerate(rows) if i not in bad]
        timestamps = [stamps[rows[j]] for j in good]
        source_partitions = [records[rows[j]].partition for j in good]
        keys_out = [key_bytes[j] for j in good]
        n = self._sink_partitions
        keyed = [(j, k) for j, k in enumerate(keys_out) if k is not None]
        partitions = [sp % n for sp in source_partitions]  # keyless: stays with its input
        for (j, _k), p in zip(keyed, partitions_of([k for _j, k in keyed], n), strict=True):
            partitions[j] = p
        values_out = value_bytes.take(pa.array(good, pa.int64()))
        vectorized = pa.RecordBatch.from_arrays(
            [
                pa.array(keys_out, pa.binary()),
                values_out,
                pa.array(timestamps, pa.int64()),
                pa.array(partitions, pa.int32()),
                pa.array(source_partitions, pa.int32()),
                pa.array([records[rows[j]].offset for j in good], pa.int64()),
                pa.nulls(len(good), pa.string()),
            ],
            schema=OUTPUT_ARROW,
        )
        if not bad:
            return vectorized
        slow = output_batch(*self.records.process([records[i] for i in sorted(bad)]))
        return pa.concat_batches([vectorized, slow])

    # -- the steps ---------------------------------------------------------------------------------

    def _keys(
        self,
        records: Sequence[InputRecord],
        rows: list[int],
        keys: list[Column],
        bad: dict[int, str],
    ) -> list[bytes | None]:
        """Each output row's record key (rows: the output rows' input indices)."""
        if not keys:
            return [None] * len(rows)
        keyless = not self.compiled.partition_by
        if self._sink_kafka_string_key:
            (column,) = keys
            assert not isinstance(column, list)
            out: list[bytes | None] = column.cast(pa.binary()).to_pylist()
        else:
            out = []
            lists = [k if isinstance(k, list) else k.to_pylist() for k in keys]
            for j, each in enumerate(zip(*lists, strict=True)):
                try:
                    out.append(self._sink_serde.serialize_key(list(each)))
                except Exception as exc:  # noqa: BLE001 - the per-record path reports it
                    bad[j] = str(exc)
                    out.append(None)
        if keyless:  # a null key stays null (not an object of NULLs)
            for j, i in enumerate(rows):
                if records[i].key is None:
                    out[j] = None
        return out

    def _values(self, values: list[Column], bad: dict[int, str]) -> pa.Array:
        """Each output row's record value, as binary."""
        return value_bytes(
            values,
            self._value_names,
            self._value_types,
            self._sink_serde if not self._sink_json else None,
            bad,
        )


def value_bytes(
    values: list[Column],
    names: Sequence[str],
    types: Sequence[SqlType],
    serde: RowSerde | None,
    bad: dict[int, str],
) -> pa.Array:
    """Each row's record value, as binary, from the value columns ``values`` (named ``names``, of
    ``types``): JSON objects written as columns (``serde`` None: the sink's values are JSON objects
    of its columns, `json_object_values`), else each row through the sink's ``serde``. The rows
    that cannot be written go onto ``bad`` (index -> why; their value is NULL)."""
    if serde is None:
        fragments = []
        for column, t in zip(values, types, strict=True):
            text, wrong = json_fragments(column, t)
            bad.update({j: why for j, why in wrong.items() if j not in bad})
            fragments.append(text)
        return json_objects(list(names), fragments)
    lists = [v if isinstance(v, list) else v.to_pylist() for v in values]
    size = len(lists[0]) if lists else 0
    out: list[bytes | None] = []
    for j in range(size):
        row = {name: column[j] for name, column in zip(names, lists, strict=True)}
        try:
            out.append(serde.serialize_value(row))
        except Exception as exc:  # noqa: BLE001 - the per-record path reports it
            bad[j] = str(exc)
            out.append(None)
    return pa.array(out, pa.binary())
