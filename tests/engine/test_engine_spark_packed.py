"""A stateless query's records travel from its source tasks to its sink packed, one row per Arrow
batch (`engine/spark/packed.py`): what the sink unpacks is what the tasks computed, in their order,
whatever the records' size."""

from __future__ import annotations

import json

import pyarrow as pa

from headwater.engine.persistent.columnar_run import OUTPUT_ARROW
from headwater.engine.spark.packed import PACKED_ARROW, pack, unpack


def _batch(n: int, value_size: int = 8) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [f"k{i}".encode() if i % 3 else None for i in range(n)],
            "value": [bytes([65 + i % 26]) * value_size for i in range(n)],
            "timestamp": list(range(1000, 1000 + n)),
            "partition": [i % 2 for i in range(n)],
            "source_partition": [i % 2 for i in range(n)],
            "source_offset": list(range(n)),
            "error": [None if i % 7 else "kind" for i in range(n)],
        },
        schema=OUTPUT_ARROW,
    )


def _unpacked(*packed: pa.RecordBatch) -> list[dict]:
    return [
        row for t in unpack(pa.Table.from_batches(packed, PACKED_ARROW)) for row in t.to_pylist()
    ]


def test_the_sink_reads_the_tasks_batches_row_for_row_in_their_order() -> None:
    first, second = _batch(50), _batch(20)
    packed = pack(first)
    assert packed.schema == PACKED_ARROW and packed.num_rows == 1
    assert _unpacked(packed, pack(second)) == first.to_pylist() + second.to_pylist()
    assert unpack(pa.Table.from_batches([packed]))[0].schema == OUTPUT_ARROW


def test_big_batches_are_cut_into_rows_of_bounded_size() -> None:
    batch = _batch(100, value_size=1000)  # ~100 kB
    packed = pack(batch, most_bytes=10_000)
    assert packed.num_rows >= 10
    assert max(len(blob) for blob in packed.column(0).to_pylist()) < 20_000
    assert _unpacked(packed) == batch.to_pylist()
    # one record larger than the bound is a row of its own, never dropped
    huge = _batch(3, value_size=50_000)
    assert _unpacked(pack(huge, most_bytes=10_000)) == huge.to_pylist()


def test_an_empty_batch_packs_to_no_row() -> None:
    assert pack(_batch(0)).num_rows == 0
    assert unpack(pa.Table.from_batches([pack(_batch(0))])) == []


def test_an_aggregations_output_leaves_each_operator_call_packed() -> None:
    from headwater.engine.persistent.query_run import OutputRecord
    from headwater.engine.spark.aggregation import (
        AGGREGATED_ARROW,
        PackedOutput,
        Result,
        Skipped,
        results_batch,
    )

    class Counts:
        """An operator: one output record per input row, and a skipped record."""

        def init(self, handle: object) -> None:
            self.handle = handle

        def results_batch(self, rows: object) -> pa.RecordBatch:
            out: list[Result] = []
            for n, row in enumerate(rows):  # type: ignore[call-overload]
                if row == "bad":
                    out.append(Skipped(0, n, "kind", b"{}"))
                else:
                    out.append(OutputRecord(b"k", row, n, 0, 0, n, n, 0))
            return results_batch(out)

        def close(self) -> None:
            self.closed = True

    inner = Counts()
    operator = PackedOutput(inner)  # type: ignore[arg-type]
    operator.init("handle")
    assert inner.handle == "handle"
    assert list(operator.handleInputRows(("g",), iter([]), None)) == []  # nothing: no row
    packed = list(operator.handleInputRows(("g",), iter([b"1", "bad", b"3"]), None))
    assert [list(row.asDict()) for row in packed] == [["records"]]
    table = pa.Table.from_pylist([row.asDict() for row in packed], schema=PACKED_ARROW)
    (batch,) = unpack(table)
    assert batch.schema == AGGREGATED_ARROW
    rows = batch.to_pylist()
    assert [(r["value"], r["error"], r["source_offset"], r["partition"]) for r in rows] == [
        (b"1", None, 0, 0),
        (b"{}", "kind", 1, -1),
        (b"3", None, 2, 0),
    ]
    operator.close()
    assert inner.closed


def test_results_as_columns_are_the_rows_an_unpacked_operator_yields() -> None:
    from headwater.engine.persistent.query_run import OutputRecord
    from headwater.engine.spark.aggregation import Skipped, result_row, results_batch

    results = [
        OutputRecord(b"k1", b'{"N":1}', 10, 1, 0, 5, 0, 3),
        Skipped(1, 7, "serialization", b'{"kind": "serialization"}'),
        OutputRecord(None, None, 11, 0, 1, 8, 2, 4),  # a tombstone without a key
    ]
    assert results_batch(results).to_pylist() == [result_row(r).asDict() for r in results]


def test_a_stateless_batch_ranked_is_the_rows_its_results_give() -> None:
    from headwater.engine.persistent.columnar_run import output_batch
    from headwater.engine.persistent.query_run import OutputRecord, ProcessingError
    from headwater.engine.spark.aggregation import Skipped, ranked, results_batch

    outputs = [OutputRecord(b"k", b"v", 5, 1, 0, 7), OutputRecord(None, None, 6, 0, 1, 8)]
    errors = [ProcessingError("q", "processing", "bad", "topic", 1, 9)]
    batch = ranked(output_batch(outputs, errors))
    expected = results_batch([*outputs, *map(Skipped.of, errors)])
    assert batch.schema == expected.schema

    def rows(b: pa.RecordBatch) -> list[dict[str, object]]:
        found = b.to_pylist()
        for row in found:  # a skipped record's detail: JSON, written by each its own way
            row["value"] = json.loads(row["value"]) if row["error"] else row["value"]
        return found

    assert rows(batch) == rows(expected)
