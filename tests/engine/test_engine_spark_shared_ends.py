"""The shared end watcher (`engine.spark.shared_ends`): the file's rules, and one consumer on the
embedded broker following exactly the topics it is given."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from headwater.engine.spark.shared_ends import (
    MAX_AGE_S,
    EndWatch,
    ends_text,
    read_shared_ends,
    shared_ends,
)
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer


def test_the_file_gives_every_partition_of_a_topic_or_nothing() -> None:
    text = ends_text({"t": {0: 5, 1: 7}, "u": {0: 1}}, now=100.0)
    assert shared_ends(text, "t", 2, now=100.5) == {"0": 5, "1": 7}
    assert shared_ends(text, "u", 2, now=100.5) is None  # partition 1 not known yet
    assert shared_ends(text, "v", 1, now=100.5) is None  # a topic it does not watch
    assert shared_ends(text, "t", 2, now=100.0 + MAX_AGE_S + 0.1) is None  # stale: its watcher
    for broken in ("", "{", "[]", json.dumps({"at": "x", "ends": {}}), json.dumps({"at": 1})):
        assert shared_ends(broken, "t", 2, now=1.0) is None


def _wait(check: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.kafka
def test_one_consumer_follows_the_ends_of_the_topics_it_is_given(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    admin = admin_client(memory_kafka)
    create_topic(admin, memory_kafka, topic_name, 2)
    writer = producer(memory_kafka, "test")
    for i in range(5):
        writer.produce(topic_name, b"v", f"k{i}".encode(), partition=i % 2)
    writer.flush()
    path = tmp_path / "ends.json"
    watch = EndWatch(memory_kafka, path)
    try:
        watch.follow({topic_name: 2})
        _wait(lambda: read_shared_ends(str(path), topic_name, 2) == {"0": 3, "1": 2})
        writer.produce(topic_name, b"v", b"late", partition=1)
        writer.flush()
        _wait(lambda: read_shared_ends(str(path), topic_name, 2) == {"0": 3, "1": 3}, 5)
        watch.follow({})  # its query stopped: the topic is let go at once
        text = path.read_text()
        assert topic_name not in json.loads(text)["ends"]
    finally:
        watch.close()
    assert not path.exists(), "the file goes with its watcher"
