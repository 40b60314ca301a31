"""A stateless query's sink records on their way from its source tasks to its sink: each Arrow batch
a task computed travels as one row holding the batch in Arrow's IPC stream format. Pure.

Spark turns what a Python data source yields into its own rows, and ``foreachBatch``'s ``toArrow``
turns them back into Arrow for the sink: two conversions of every record in the JVM (its share of
a stateless query's CPU was a third, bench.profile_queries). Packed, the JVM moves a few rows a
micro-batch, each an opaque byte string, and the sink reads the batches as the tasks built them.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["PACKED_ARROW", "PACKED_SCHEMA", "pack", "unpack"]

#: The rows a stateless query's source task yields (Spark DDL, and the same as Arrow).
PACKED_SCHEMA = "records binary"
PACKED_ARROW = pa.schema([("records", pa.binary())])
#: The most bytes of records one packed row holds (about: a single larger record is one row).
PIECE_BYTES = 64 * 1024 * 1024


def pack(batch: pa.RecordBatch, most_bytes: int = PIECE_BYTES) -> pa.RecordBatch:
    """Rows holding ``batch`` (its schema and columns, Arrow IPC stream): one, or one per slice of
    at most about ``most_bytes`` (huge records: a row's bytes stay far below Spark's and Arrow's 2
    GB limits, and a piece below what one task's memory holds twice)."""
    count, size = len(batch), batch.nbytes
    step = count if size <= most_bytes else max(1, count * most_bytes // size)
    blobs = [_ipc(batch.slice(i, step)) for i in range(0, count, step)] if count else []
    return pa.RecordBatch.from_arrays([pa.array(blobs, pa.binary())], schema=PACKED_ARROW)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def unpack(packed: pa.Table) -> list[pa.Table]:
    """The batches ``packed`` (rows of `PACKED_ARROW`) holds, in its order."""
    return [
        pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
        for chunk in packed.column("records").chunks
        for blob in chunk.to_pylist()
        if blob is not None
    ]
