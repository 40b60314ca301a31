"""The workloads the benchmarks share (not a benchmark itself): the peers' filter + projection.

The peers' workload (bytewax, Quix Streams, Faust, measured here in November 2026): JSON records of
five fields, ``WHERE amount > 50``, four columns out, one arithmetic, one upper-case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from confluent_kafka import Producer

TX_STREAM = (
    "CREATE STREAM tx (id STRING KEY, item STRING, amount INT, price DOUBLE, note "
    "STRING) WITH (kafka_topic='tx', partitions=2, value_format='JSON');"
)
TX_QUERY = (
    "CREATE STREAM tx_big AS SELECT id, UCASE(item) AS item, amount * price AS total, "
    "amount FROM tx WHERE amount > 50;"
)
#: The sink topic of `TX_QUERY`.
TX_SINK = "TX_BIG"


def tx_record(i: int) -> tuple[bytes, bytes]:
    """The ``i``-th record of the workload: (key, value)."""
    value = {"ITEM": f"item{i % 100}", "AMOUNT": i % 100, "PRICE": 1.5, "NOTE": "x" * 20}
    return f"k{i % 5000}".encode(), json.dumps(value).encode()


def tx_passing(records: int) -> int:
    """How many of the first ``records`` records pass `TX_QUERY`'s filter."""
    return sum(1 for i in range(records) if i % 100 > 50)


def produce_all(writer: Producer, topic: str, records: Iterable[tuple[bytes, bytes]]) -> None:
    """Produces (key, value) ``records`` to ``topic``, waiting while the producer's queue is full
    (the caller flushes)."""
    for key, value in records:
        while True:
            try:
                writer.produce(topic, value, key)
                break
            except BufferError:
                writer.poll(0.05)


def produce_tx(writer: Producer, records: int, topic: str = "tx") -> None:
    """Produces the first ``records`` records of the workload to ``topic`` and flushes them."""
    produce_all(writer, topic, (tx_record(i) for i in range(records)))
    writer.flush()
