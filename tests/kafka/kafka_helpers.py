"""Helpers of the Kafka tests: produce, read back, and check processes by pid. Does I/O."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import KafkaError, TopicPartition

from headwater.kafka.clients import KafkaSettings, admin_client, consumer, create_topic, producer

Record = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value


def make_topic(settings: KafkaSettings, name: str, partitions: int) -> None:
    """Create `name` through the factory's create_topic."""
    create_topic(admin_client(settings), settings, name, partitions)


def produce(settings: KafkaSettings, topic: str, count: int, *, prefix: str = "v") -> None:
    """Produce `count` keyed records in one burst (batched by librdkafka) and wait for delivery."""
    sender = producer(settings, "test-producer")
    for i in range(count):
        sender.produce(topic, key=f"key-{i % 13}".encode(), value=f"{prefix}-{i}".encode())
    assert sender.flush(30) == 0


def read_all(settings: KafkaSettings, topic: str, partitions: Iterable[int]) -> list[Record]:
    """Every record of the partitions, read to end of partition, sorted by (partition, offset)."""
    wanted = set(partitions)
    reader = consumer(settings, "test-reader", partition_eof=True, fetch_wait_max_ms=20)
    reader.assign([TopicPartition(topic, p, 0) for p in wanted])
    records: list[Record] = []
    done: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while done != wanted:
            assert time.monotonic() < deadline, f"read_all({topic}) timed out, at EOF: {done}"
            message = reader.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                done.add(message.partition())
                continue
            records.append((message.partition(), message.offset(), message.key(), message.value()))
    finally:
        reader.close()
    return sorted(records)


def pid_running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (PID 1 here may not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: Iterable[int], timeout_s: float = 15.0) -> list[int]:
    """Wait until no process of `pids` runs; return those still running at the timeout."""
    pending = list(pids)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        pending = [pid for pid in pending if pid_running(pid)]
        time.sleep(0.05)
    return pending


def children_of(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found
