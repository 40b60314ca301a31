"""The race's limit: the peers' workloads as a plain loop (confluent-kafka + orjson).

Run by `bench.race` in its own process: ``python -m bench._race_loop BOOTSTRAP INPUT OUTPUT
[filter|count]``. It imports nothing of headwater, as a user's hand-written consumer would not:
batches of up to 10,000 records from every partition of INPUT (assigned, from the beginning: no
group join), produced to OUTPUT under their key, the producer lingering 5 ms. It runs until it is
killed.

- ``filter`` (the default): each record decoded, filtered (``AMOUNT > 50``) and projected
  (upper-cased item, amount * price, amount);
- ``count``: a count per record key in a dict; after each batch, every key the batch changed is
  written with its count (``{"N": n}``), as a table's changelog with a cache would.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import orjson
from confluent_kafka import Consumer, Message, Producer, TopicPartition


def main(bootstrap: str, topic: str, output: str, workload: str = "filter") -> None:
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "race-loop", "enable.auto.commit": False}
    )
    partitions = len(reader.list_topics(topic, timeout=10).topics[topic].partitions)
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    writer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def send(key: bytes | None, value: bytes) -> None:
        while True:
            try:
                writer.produce(output, value, key)
                return
            except BufferError:
                writer.poll(0.01)

    step = _counting(send) if workload == "count" else _filtering(send)
    while True:
        step([m for m in reader.consume(10_000, 0.1) if m.error() is None])
        writer.poll(0)


def _filtering(send: Callable[[bytes | None, bytes], None]) -> Callable[[list[Message]], None]:
    def step(messages: list[Message]) -> None:
        for message in messages:
            row = orjson.loads(message.value())
            amount = row.get("AMOUNT")
            if amount is None or amount <= 50:
                continue
            out = {"ITEM": row["ITEM"].upper(), "TOTAL": amount * row["PRICE"], "AMOUNT": amount}
            send(message.key(), orjson.dumps(out))

    return step


def _counting(send: Callable[[bytes | None, bytes], None]) -> Callable[[list[Message]], None]:
    counts: dict[bytes | None, int] = {}

    def step(messages: list[Message]) -> None:
        changed: set[bytes | None] = set()
        for message in messages:
            key = message.key()
            counts[key] = counts.get(key, 0) + 1
            changed.add(key)
        for key in changed:
            send(key, orjson.dumps({"N": counts[key]}))

    return step


if __name__ == "__main__":
    main(*sys.argv[1:5])
