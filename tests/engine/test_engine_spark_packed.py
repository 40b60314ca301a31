"""A stateless query's records travel from its source tasks to its sink packed, one row per Arrow
batch (`engine/spark/packed.py`): what the sink unpacks is what the tasks computed, in their order,
whatever the records' size."""

from __future__ import annotations

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
