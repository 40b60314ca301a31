"""Does the durable embedded broker keep every write it confirmed through kill -9? No headwater code
runs here but the broker's launcher: plain librdkafka clients against Tansu on SeaweedFS.

One producer (acks=all, linger 5 ms, idempotent unless ``--no-idempotence``: the settings of a
persistent query's sink) writes bursts of 1-60 numbered records to a 2-partition topic and notes each
delivery report's partition and offset, while the broker (Tansu and SeaweedFS) is killed -9 every
6-12 s and started again on its data folder and port 2-6 s later. Then the topic is read back whole
and every confirmed record looked up at its confirmed offset.

    python -m bench.broker_durability [--minutes 3] [--seed 1] [--no-idempotence] [--json]

Prints the kills, the records confirmed, those not found where the broker said (lost), and each
confirmation at an offset not past those confirmed before it on its partition (what
`engine/spark/sink.Confirmations` holds as suspect). Exits 1 when a confirmed record was lost: the
broker's fault, which headwater's sink makes up for (docs/embedded-broker.md, "an idempotent
producer's records are confirmed at offsets already used after a restart"). Measured here (2 cores,
November 2026): idempotent, 9 and 46 lost over 14 and 19 kills, each time the first records after a
restart, confirmed at offsets from 0 (or none) of a partition holding thousands; not idempotent, 0
of 24,112 over 19 kills.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from bench.chaos import Broker
from headwater.kafka.clients import admin_client, create_topic

TOPIC = "durability"
PARTITIONS = 2


class Writer:
    """The producer thread, and what the broker confirmed: value -> (partition, offset)."""

    def __init__(self, bootstrap: str, idempotent: bool, seed: int) -> None:
        self.confirmed: dict[int, tuple[int, int | None]] = {}
        self.failed: Counter[str] = Counter()
        self.written = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rng = random.Random(seed)
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
                "on_delivery": self._report,
                "log_level": 0,
            }
        )
        self._thread = threading.Thread(target=self._run, name="durability-writer")

    def _report(self, error: KafkaError | None, message: Message) -> None:
        value = int(message.value() or b"0")
        with self._lock:
            if error is None:
                self.confirmed[value] = (int(message.partition() or 0), message.offset())
            else:
                self.failed[str(error.name())] += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(self._rng.randint(1, 60)):
                value = self.written
                while True:
                    try:
                        self._producer.produce(
                            TOPIC, str(value).encode(), None, partition=value % PARTITIONS
                        )
                        break
                    except BufferError:
                        self._producer.poll(0.05)
                self.written += 1
            self._producer.flush(30)
            time.sleep(self._rng.uniform(0.0, 0.3))
        self._producer.flush(60)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def read_back(bootstrap: str) -> dict[tuple[int, int], int]:
    """Every record of the topic: (partition, offset) -> value (each partition read to its end)."""
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "durability-check",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 200,
            "log_level": 0,
        }
    )
    found: dict[tuple[int, int], int] = {}
    try:
        for partition in range(PARTITIONS):
            reader.assign([TopicPartition(TOPIC, partition, 0)])
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                message = reader.poll(1.0)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        break
                    continue
                found[(partition, int(message.offset() or 0))] = int(message.value() or b"0")
            else:
                raise TimeoutError(f"{TOPIC}[{partition}] not read to its end in 120 s")
    finally:
        reader.close()
    return found


def went_back(confirmed: dict[int, tuple[int, int | None]]) -> list[tuple[int, int, int | None]]:
    """(value, partition, offset) of each confirmation, in the order written, at an offset not
    past every offset confirmed before on its partition."""
    top: dict[int, int] = {}
    found = []
    for value in sorted(confirmed):
        partition, offset = confirmed[value]
        if offset is None or offset <= top.get(partition, -1):
            found.append((value, partition, offset))
        else:
            top[partition] = offset
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="headwater-durability-"))
    broker = Broker(work / "broker")
    try:
        create_topic(admin_client(broker.settings()), broker.settings(), TOPIC, PARTITIONS)
        writer = Writer(broker.bootstrap, not args.no_idempotence, args.seed)
        writer.start()
        chooser = random.Random(args.seed)
        deadline = time.monotonic() + args.minutes * 60
        kills = 0
        try:
            while time.monotonic() < deadline:
                time.sleep(chooser.uniform(6, 12))
                broker.kill()
                kills += 1
                time.sleep(chooser.uniform(2, 6))
                broker.relaunch()
        finally:
            writer.stop()
        found = read_back(broker.bootstrap)
    finally:
        broker.stop()
    values = Counter(found.values())
    confirmed = writer.confirmed
    lost = sorted(v for v, (p, o) in confirmed.items() if o is None or found.get((p, o)) != v)
    back = went_back(confirmed)
    return {
        "minutes": args.minutes,
        "seed": args.seed,
        "idempotent": not args.no_idempotence,
        "kills": kills,
        "written": writer.written,
        "confirmed": len(confirmed),
        "failed": dict(writer.failed),
        "lost": len(lost),
        "lost_anywhere": sum(1 for v in lost if v not in values),
        "lost_sample": lost[:10],
        "confirmed_at_offsets_gone_back": len(back),
        "gone_back_sample": back[:5],
        "duplicated": sum(n - 1 for n in values.values() if n > 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.broker_durability", description=__doc__)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-idempotence", action="store_true", help="a plain producer (acks=all, retries)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"durable embedded broker, {figures['kills']} kill -9s in {args.minutes:g} min, "
            f"{'idempotent' if figures['idempotent'] else 'plain'} producer: "
            f"{figures['confirmed']:,} of {figures['written']:,} records confirmed "
            f"(failed: {figures['failed'] or 'none'})"
        )
        print(
            f"  lost (not at their confirmed offset): {figures['lost']} "
            f"(target 0; {figures['lost_anywhere']} nowhere in the topic) "
            f"{figures['lost_sample']}"
        )
        print(
            f"  confirmed at an offset its partition had passed: "
            f"{figures['confirmed_at_offsets_gone_back']} {figures['gone_back_sample']}"
        )
        print(f"  duplicated: {figures['duplicated']}")
    return 1 if figures["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
