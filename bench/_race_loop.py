"""The race's limit: the peers' filter + projection as a plain loop (confluent-kafka + orjson).

Run by `bench.race` in its own process: ``python -m bench._race_loop BOOTSTRAP INPUT OUTPUT``. It
imports nothing of headwater, as a user's hand-written consumer would not: batches of up to 10,000
records from every partition of INPUT (assigned, from the beginning: no group join), each decoded,
filtered (``AMOUNT > 50``), projected (upper-cased item, amount * price, amount) and produced to
OUTPUT under its key, the producer lingering 5 ms. It runs until it is killed.
"""

from __future__ import annotations

import sys

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition


def main(bootstrap: str, topic: str, output: str) -> None:
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "race-loop", "enable.auto.commit": False}
    )
    partitions = len(reader.list_topics(topic, timeout=10).topics[topic].partitions)
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    writer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    while True:
        for message in reader.consume(10_000, 0.1):
            if message.error() is not None:
                continue
            row = orjson.loads(message.value())
            amount = row.get("AMOUNT")
            if amount is None or amount <= 50:
                continue
            out = {"ITEM": row["ITEM"].upper(), "TOTAL": amount * row["PRICE"], "AMOUNT": amount}
            while True:
                try:
                    writer.produce(output, orjson.dumps(out), message.key())
                    break
                except BufferError:
                    writer.poll(0.01)
        writer.poll(0)


if __name__ == "__main__":
    main(*sys.argv[1:4])
